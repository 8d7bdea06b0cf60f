// Tensors past 2^31 elements on the GPU: the kernels' 64-bit index paths, which no parity case reaches, checked on
// the elements and rows at the very end (where a 32-bit index would have wrapped), and the accuracy of a column sum
// that long. Skips without a GPU, or when the GPU has less than 32 GiB free.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include "cuda/cuda_api.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe {
namespace {

class CudaLarge : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess || free_bytes < (size_t(32) << 30))
      GTEST_SKIP() << "needs 32 GiB of free GPU memory";
  }
};

const TensorOptions kBf16Gpu = TensorOptions{}.with_dtype(DType::BFloat16).with_device(Device::cuda(0));

TEST_F(CudaLarge, ElementwiseReachesTheLastElementPast2To31) {
  const int64_t n = (int64_t(1) << 31) + 37;
  const Tensor x = full({n}, 1.0, kBf16Gpu);
  const Tensor y = x * 2.0 + x;  // [n] = 3
  EXPECT_EQ(y.narrow(0, n - 5, 5).to(Device::cpu()).to_vector<float>(), std::vector<float>(5, 3.0f));
  EXPECT_EQ(y.narrow(0, 0, 3).to(Device::cpu()).to_vector<float>(), std::vector<float>(3, 3.0f));
}

TEST_F(CudaLarge, RowKernelsReachTheLastRowPast2To31Elements) {
  const int64_t cols = 64, rows = (int64_t(1) << 31) / cols + 3;  // rows · cols > 2^31
  const Tensor row = arange(0, double(cols)) * 0.05;                // [64]
  const Tensor x = ops::add(zeros({rows, cols}, kBf16Gpu), row.to(DType::BFloat16).to(Device::cuda(0)));
  const Tensor want = ops::softmax(row.to(DType::BFloat16).to(DType::Float32), -1);
  for (const Tensor& got : {ops::softmax(x, -1), ops::rms_norm(x, ones({cols}, kBf16Gpu), 1e-5)}) {
    const Tensor last = got.narrow(0, rows - 1, 1).reshape({cols}).to(Device::cpu()).to(DType::Float32);
    const Tensor first = got.narrow(0, 0, 1).reshape({cols}).to(Device::cpu()).to(DType::Float32);
    EXPECT_EQ(testing::max_abs_diff(last, first), 0.0) << "the last row differs from the first";
  }
  const Tensor last = ops::softmax(x, -1).narrow(0, rows - 1, 1).reshape({cols}).to(Device::cpu()).to(DType::Float32);
  EXPECT_LT(testing::max_abs_diff(last, want), 1e-3);  // values 0.005-0.04, bfloat16 rounding
}

TEST_F(CudaLarge, ColumnSumPast2To31ElementsKeepsFloat32Accuracy) {
  // Over 2^17 columns one thread summed a whole column (16385 rows) in float, ~4e-6 off for U[0,1) data; chunks of
  // at most 256 rows keep it near the float64 sum. The last 64 columns are checked.
  const int64_t rows = 16385, cols = int64_t(1) << 17;  // rows · cols > 2^31
  const Tensor x = rand({rows, cols}, TensorOptions{}.with_device(Device::cuda(0)));
  const Tensor got = ops::sum(x, {0}).narrow(0, cols - 64, 64).to(Device::cpu()).to(DType::Float64);
  const Tensor want = ops::sum(x.narrow(1, cols - 64, 64).to(Device::cpu()).to(DType::Float64), {0});
  EXPECT_LT(ops::max(ops::abs(got - want) / want).item<double>(), 1e-6);
}

}  // namespace
}  // namespace uoe
