// cuda::gemm_grouped against a float64 CPU reference: many problems of mixed sizes and transposes in one call
// (equal shapes share a cuBLAS group), padded leading dimensions, accumulation, and the empty cases (M or N == 0
// writes nothing, K == 0 writes zeros or leaves an accumulated C); f32, TF32, f64 and bf16. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "cuda/cuda_api.h"
#include "cuda/grouped_gemm.h"
#include "cuda/stream.h"
#include "ops/kernels/gemm.h"

namespace uoe {
namespace {

class CudaGroupedGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

struct Shape3 {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;  // extra elements at the end of every row of A, B and C
  bool accumulate;
};

// The problems of one call: repeated shapes (groups of several), each transpose, padding, accumulation, and the
// empty cases.
std::vector<Shape3> call_shapes() {
  std::vector<Shape3> shapes;
  for (int rep = 0; rep < 3; ++rep) shapes.push_back({false, false, 48, 40, 64, 0, false});  // one group of 3
  for (int t = 0; t < 4; ++t) shapes.push_back({bool(t & 1), bool(t & 2), 17 + t, 23, 31, 2, t == 3});
  shapes.push_back({false, true, 5, 7, 129, 0, true});
  shapes.push_back({true, false, 96, 33, 3, 1, false});
  shapes.push_back({false, false, 0, 9, 5, 0, false});  // M == 0: nothing written
  shapes.push_back({false, false, 6, 0, 5, 0, false});  // N == 0: nothing written
  shapes.push_back({false, false, 6, 9, 0, 1, false});  // K == 0: C = 0
  shapes.push_back({true, true, 6, 9, 0, 0, true});     // K == 0, accumulating: C unchanged
  return shapes;
}

struct Operands {
  Tensor A, B, C0;  // CPU, in the tested dtype; C0 is C before the call
  int64_t lda, ldb, ldc;
};

// offset: every matrix starts that many elements into its GPU buffer (not 16-byte aligned for an odd offset, as a
// row block of gathered rows or a neuron offset into a weight; bfloat16 / TF32 then run outside the grouped call).
template <typename T>
void check_grouped(DType dt, bool tf32, double tolerance, uint64_t seed, int64_t offset = 0) {
  const bool previous_tf32 = cuda::allow_tf32();
  cuda::set_allow_tf32(tf32);
  Generator gen(seed);
  const std::vector<Shape3> shapes = call_shapes();
  const Device gpu = Device::cuda(0);
  std::vector<Operands> host;
  std::vector<Tensor> dA, dB, dC;
  std::vector<cuda::GemmProblem<T>> problems;
  auto on_gpu = [&](const Tensor& t) {  // [offset zeros | t's elements] on the GPU
    Tensor buf = zeros({t.numel() + offset}, TensorOptions{}.with_dtype(dt).with_device(gpu));
    buf.narrow(0, offset, t.numel()).copy_(t.reshape({-1}).to(gpu));
    return buf;
  };
  for (const Shape3& s : shapes) {
    const int64_t a_rows = s.ta ? s.K : s.M, a_cols = s.ta ? s.M : s.K;
    const int64_t b_rows = s.tb ? s.N : s.K, b_cols = s.tb ? s.K : s.N;
    Operands o{};
    o.lda = std::max<int64_t>(a_cols + s.pad, 1);
    o.ldb = std::max<int64_t>(b_cols + s.pad, 1);
    o.ldc = std::max<int64_t>(s.N + s.pad, 1);
    o.A = randn({std::max<int64_t>(a_rows, 1), o.lda}, {}, &gen).to(dt);
    o.B = randn({std::max<int64_t>(b_rows, 1), o.ldb}, {}, &gen).to(dt);
    o.C0 = randn({std::max<int64_t>(s.M, 1), o.ldc}, {}, &gen).to(dt);
    dA.push_back(on_gpu(o.A));
    dB.push_back(on_gpu(o.B));
    dC.push_back(on_gpu(o.C0));
    problems.push_back({s.ta, s.tb, s.M, s.N, s.K, dA.back().template data_ptr<T>() + offset, o.lda,
                        dB.back().template data_ptr<T>() + offset, o.ldb, dC.back().template data_ptr<T>() + offset,
                        o.ldc, s.accumulate});
    host.push_back(o);
  }
  cuda::gemm_grouped(problems, "test grouped gemm");
  cuda::synchronize(0, "test grouped gemm");
  cuda::set_allow_tf32(previous_tf32);
  EXPECT_EQ(cuda::grouped_gemm_fallback(), "") << "cuBLAS refused the grouped call: the problems ran one by one";

  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape3& s = shapes[i];
    const Operands& o = host[i];
    const std::string what = "problem " + std::to_string(i) + " M=" + std::to_string(s.M) + " N=" +
                             std::to_string(s.N) + " K=" + std::to_string(s.K) + " ta=" + std::to_string(s.ta) +
                             " tb=" + std::to_string(s.tb) + " accumulate=" + std::to_string(s.accumulate);
    const Tensor A64 = o.A.to(DType::Float64), B64 = o.B.to(DType::Float64);
    Tensor ref = o.C0.to(DType::Float64).clone();
    if (s.M > 0 && s.N > 0)
      cpu::gemm<double>(s.ta, s.tb, s.M, s.N, s.K, 1.0, A64.data_ptr<double>(), o.lda, B64.data_ptr<double>(), o.ldb,
                        s.accumulate ? 1.0 : 0.0, ref.data_ptr<double>(), o.ldc);
    const std::vector<double> out =
        dC[i].narrow(0, offset, o.C0.numel()).to(Device::cpu()).to(DType::Float64).to_vector<double>();
    const std::vector<double> want = ref.to_vector<double>(), init = o.C0.to(DType::Float64).to_vector<double>();
    double diff = 0, norm = 0;
    for (int64_t r = 0; r < std::max<int64_t>(s.M, 1); ++r)
      for (int64_t c = 0; c < o.ldc; ++c) {
        const size_t k = size_t(r * o.ldc + c);
        if (r < s.M && c < s.N) {
          ASSERT_FALSE(std::isnan(out[k])) << what;
          diff += (out[k] - want[k]) * (out[k] - want[k]);
          norm += want[k] * want[k];
        } else {
          ASSERT_EQ(out[k], init[k]) << what << ": element (" << r << ", " << c << ") outside the result changed";
        }
      }
    if (s.K == 0 && !s.accumulate && s.M > 0 && s.N > 0) {
      EXPECT_EQ(norm, 0.0) << what << ": K == 0 must give zeros";
    }
    EXPECT_LE(norm == 0 ? std::sqrt(diff) : std::sqrt(diff / norm), tolerance) << what;
  }
}

TEST_F(CudaGroupedGemm, Float32MatchesReference) { check_grouped<float>(DType::Float32, false, 1e-5, 11); }
TEST_F(CudaGroupedGemm, Tf32MatchesReferenceWithinTf32Tolerance) {
  check_grouped<float>(DType::Float32, true, 2e-3, 12);
}
TEST_F(CudaGroupedGemm, Float64MatchesReference) { check_grouped<double>(DType::Float64, false, 1e-12, 13); }
TEST_F(CudaGroupedGemm, BFloat16MatchesReferenceWithFloatAccumulation) {
  check_grouped<BFloat16>(DType::BFloat16, false, 1e-2, 14);
}

TEST_F(CudaGroupedGemm, MatricesNotSixteenByteAlignedGiveTheSameResults) {
  for (int64_t offset : {1, 2, 3}) {
    check_grouped<BFloat16>(DType::BFloat16, false, 1e-2, 15, offset);
    check_grouped<float>(DType::Float32, true, 2e-3, 16, offset);
    check_grouped<float>(DType::Float32, false, 1e-5, 17, offset);
    check_grouped<double>(DType::Float64, false, 1e-12, 18, offset);
  }
}

TEST_F(CudaGroupedGemm, NegativeSizeIsAnErrorNamingTheCaller) {
  std::vector<cuda::GemmProblem<float>> problems{{false, false, -1, 2, 2, nullptr, 2, nullptr, 2, nullptr, 2, false}};
  try {
    cuda::gemm_grouped(problems, "my_op");
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[my_op]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace uoe
