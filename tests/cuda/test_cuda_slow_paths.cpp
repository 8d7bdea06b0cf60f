// GPU slow paths are counted (core/slow_paths.h): bf16 attention on a misaligned view or with a head dim the
// tensor-core kernels lack runs the scalar kernels, and grouped GEMMs with an unaligned bf16 matrix run one by
// one; the fast routes count nothing. Skips without a GPU.
#include <gtest/gtest.h>

#include <string>

#include "core/slow_paths.h"
#include "core/tensor.h"
#include "cuda/cuda_api.h"
#include "cuda/grouped_gemm.h"
#include "ops/ops.h"

namespace uoe {
namespace {

class CudaSlowPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

uint64_t count_of(const std::string& name) {
  for (const slow_paths::Entry& e : slow_paths::snapshot())
    if (e.name == name) return e.count;
  return 0;
}

const TensorOptions kGpuBf16 = TensorOptions{}.with_dtype(DType::BFloat16).with_device(Device::cuda(0));

Tensor gpu_bf16(const Shape& shape) { return randn(shape).to(DType::BFloat16).to(Device::cuda(0)); }

TEST_F(CudaSlowPaths, Bf16AttentionCountsEachScalarFallbackByReason) {
  const std::string misaligned = "attention_bf16_scalar.misaligned", head_dim = "attention_bf16_scalar.head_dim";
  const uint64_t misaligned0 = count_of(misaligned), head_dim0 = count_of(head_dim);
  const Tensor k = gpu_bf16({1, 2, 16, 64}), v = gpu_bf16({1, 2, 16, 64});
  (void)ops::scaled_dot_product_attention(gpu_bf16({1, 2, 16, 64}), k, v);  // the tensor-core kernels
  EXPECT_EQ(count_of(misaligned), misaligned0);
  EXPECT_EQ(count_of(head_dim), head_dim0);

  // q one element into its storage: 2 bytes off a 16-byte boundary
  const Tensor q = gpu_bf16({1 + 2 * 16 * 64}).narrow(0, 1, 2 * 16 * 64).view({1, 2, 16, 64});
  (void)ops::scaled_dot_product_attention(q, k, v);
  EXPECT_EQ(count_of(misaligned), misaligned0 + 1);

  const Tensor q80 = gpu_bf16({1, 2, 16, 80}), k80 = gpu_bf16({1, 2, 16, 80}), v80 = gpu_bf16({1, 2, 16, 80});
  (void)ops::scaled_dot_product_attention(q80, k80, v80);
  EXPECT_EQ(count_of(head_dim), head_dim0 + 1);
  bool named = false;
  for (const slow_paths::Entry& e : slow_paths::snapshot())
    if (e.name == head_dim) named = e.what.find("head dim") != std::string::npos;
  EXPECT_TRUE(named);
}

TEST_F(CudaSlowPaths, GroupedGemmWithAnUnalignedBf16MatrixIsCounted) {
  const std::string name = "grouped_gemm_per_problem.misaligned";
  const Tensor a = gpu_bf16({8 + 8 * 8}), b = gpu_bf16({8, 8}), c = zeros({2, 8, 8}, kGpuBf16);
  const auto* A = a.data_ptr<BFloat16>();
  const auto* B = b.data_ptr<BFloat16>();
  auto* C = c.data_ptr<BFloat16>();
  const uint64_t before = count_of(name);
  cuda::gemm_grouped<BFloat16>({{false, false, 8, 8, 8, A + 8, 8, B, 8, C, 8, false}}, "test");  // aligned
  EXPECT_EQ(count_of(name), before);
  cuda::gemm_grouped<BFloat16>({{false, false, 8, 8, 8, A + 8, 8, B, 8, C, 8, false},
                                {false, false, 7, 8, 8, A + 1, 8, B, 8, C + 64, 8, false}},  // A 2 bytes off
                               "test");
  EXPECT_EQ(count_of(name), before + 1);
}

}  // namespace
}  // namespace uoe
