// CUDA GEMM (cuBLASLt) against a float64 CPU reference: every transpose combination, odd sizes, padded leading
// dimensions, strided batches with broadcast (stride 0) operands, the K == 0 / alpha == 0 / beta cases, f32
// exact, TF32 and bf16; and ops::matmul on CUDA tensors. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/half.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"
#include "ops/kernels/gemm.h"
#include "ops/ops.h"

namespace uoe {
namespace {

class CudaGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

enum class Kind { F32, TF32, F64, BF16 };

const char* kind_name(Kind k) {
  switch (k) {
    case Kind::F32: return "f32";
    case Kind::TF32: return "tf32";
    case Kind::F64: return "f64";
    case Kind::BF16: return "bf16";
  }
  return "?";
}

DType dtype_of_kind(Kind k) {
  return k == Kind::F64 ? DType::Float64 : k == Kind::BF16 ? DType::BFloat16 : DType::Float32;
}

double tolerance(Kind k) {
  switch (k) {
    case Kind::F32: return 1e-5;
    case Kind::TF32: return 2e-3;
    case Kind::F64: return 1e-12;
    case Kind::BF16: return 1e-2;
  }
  return 0;
}

struct Problem {
  int64_t batch = 1;
  bool ta = false, tb = false;
  int64_t M = 1, N = 1, K = 1;
  int64_t pad = 0;  // extra elements at the end of every row of A, B and C
  bool broadcast_a = false, broadcast_b = false, shared_c = false;
  double alpha = 1.0, beta = 0.0;
  bool nan_a = false;  // A filled with NaN (alpha == 0 must not read it)
};

// A stored [batch, rows, ld] buffer of fresh normal values in `dt` (NaN when asked), on the CPU.
Tensor random_buffer(int64_t batch, int64_t rows, int64_t ld, DType dt, Generator& gen, bool nan = false) {
  const Shape shape{std::max<int64_t>(batch, 1), std::max<int64_t>(rows, 1), std::max<int64_t>(ld, 1)};
  if (nan) return full(shape, std::numeric_limits<double>::quiet_NaN(), TensorOptions{}.with_dtype(dt));
  return randn(shape, {}, &gen).to(dt);
}

// Runs one problem on the GPU and on the CPU in float64; returns ||gpu - ref|| / ||ref|| over the M x N results,
// and checks that the padding of C kept its initial value.
double run_problem(const Problem& p, Kind kind, uint64_t seed) {
  Generator gen(seed);
  const DType dt = dtype_of_kind(kind);
  const int64_t a_rows = p.ta ? p.K : p.M, a_cols = p.ta ? p.M : p.K;
  const int64_t b_rows = p.tb ? p.N : p.K, b_cols = p.tb ? p.K : p.N;
  const int64_t lda = std::max<int64_t>(a_cols + p.pad, 1), ldb = std::max<int64_t>(b_cols + p.pad, 1);
  const int64_t ldc = std::max<int64_t>(p.N + p.pad, 1);
  const int64_t a_batch = p.broadcast_a ? 1 : p.batch, b_batch = p.broadcast_b ? 1 : p.batch;
  const int64_t c_batch = p.shared_c ? 1 : p.batch;
  const int64_t sa = p.broadcast_a ? 0 : std::max<int64_t>(a_rows, 1) * lda;
  const int64_t sb = p.broadcast_b ? 0 : std::max<int64_t>(b_rows, 1) * ldb;
  const int64_t sc = p.shared_c ? 0 : std::max<int64_t>(p.M, 1) * ldc;
  const Tensor A = random_buffer(a_batch, a_rows, lda, dt, gen, p.nan_a);
  const Tensor B = random_buffer(b_batch, b_rows, ldb, dt, gen);
  // C starts as NaN when beta == 0 (it must not be read) and as random values otherwise.
  const Tensor C0 = random_buffer(c_batch, p.M, ldc, dt, gen, p.beta == 0.0);

  // float64 reference on the CPU from the very values the GPU sees.
  const Tensor A64 = A.to(DType::Float64), B64 = B.to(DType::Float64);
  Tensor ref = C0.to(DType::Float64).clone();
  cpu::gemm_batched<double>(p.batch, p.ta, p.tb, p.M, p.N, p.K, p.alpha, A64.data_ptr<double>(), lda, sa,
                            B64.data_ptr<double>(), ldb, sb, p.beta, ref.data_ptr<double>(), ldc, sc);

  const Device gpu = Device::cuda(0);
  const Tensor dA = A.to(gpu), dB = B.to(gpu), dC = C0.to(gpu);
  switch (kind) {
    case Kind::F32:
    case Kind::TF32:
      cuda::gemm_batched<float>(p.batch, p.ta, p.tb, p.M, p.N, p.K, float(p.alpha), dA.data_ptr<float>(), lda, sa,
                                dB.data_ptr<float>(), ldb, sb, float(p.beta), dC.data_ptr<float>(), ldc, sc);
      break;
    case Kind::F64:
      cuda::gemm_batched<double>(p.batch, p.ta, p.tb, p.M, p.N, p.K, p.alpha, dA.data_ptr<double>(), lda, sa,
                                 dB.data_ptr<double>(), ldb, sb, p.beta, dC.data_ptr<double>(), ldc, sc);
      break;
    case Kind::BF16:
      cuda::gemm_batched_bf16(p.batch, p.ta, p.tb, p.M, p.N, p.K, float(p.alpha), dA.data_ptr<BFloat16>(), lda,
                              sa, dB.data_ptr<BFloat16>(), ldb, sb, float(p.beta), dC.data_ptr<BFloat16>(), ldc, sc);
      break;
  }
  cuda::synchronize(0, "test gemm");
  const std::vector<double> out = dC.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  const std::vector<double> want = ref.to_vector<double>();
  const std::vector<double> init = C0.to(DType::Float64).to_vector<double>();
  double diff = 0, norm = 0;
  for (int64_t b = 0; b < c_batch; ++b)
    for (int64_t i = 0; i < std::max<int64_t>(p.M, 1); ++i)
      for (int64_t j = 0; j < ldc; ++j) {
        const size_t k = size_t(b * std::max<int64_t>(p.M, 1) * ldc + i * ldc + j);
        if (i < p.M && j < p.N) {
          if (std::isnan(out[k])) return std::numeric_limits<double>::infinity();  // NaN never passes
          diff += (out[k] - want[k]) * (out[k] - want[k]);
          norm += want[k] * want[k];
        } else {
          // Outside the M x N results (padding, or everything when M or N is 0): untouched.
          const bool same = std::isnan(init[k]) ? std::isnan(out[k]) : out[k] == init[k];
          if (!same) return std::numeric_limits<double>::infinity();
        }
      }
  if (norm == 0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}

// Sets TF32 for the scope of one test.
struct Tf32Scope {
  explicit Tf32Scope(bool on) : previous(cuda::allow_tf32()) { cuda::set_allow_tf32(on); }
  ~Tf32Scope() { cuda::set_allow_tf32(previous); }
  bool previous;
};

void check_kind(Kind kind) {
  Tf32Scope tf32(kind == Kind::TF32);
  const int64_t sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {33, 17, 65}, {64, 96, 128}, {127, 129, 257}, {1, 300, 70}};
  uint64_t seed = 1000 + uint64_t(kind) * 100000;
  for (const auto& s : sizes)
    for (int t = 0; t < 4; ++t)
      for (int64_t pad : {0, 3})
        for (double beta : {0.0, 0.75}) {
          Problem p;
          p.ta = t & 1;
          p.tb = t & 2;
          p.M = s[0];
          p.N = s[1];
          p.K = s[2];
          p.pad = pad;
          p.alpha = beta == 0.0 ? 1.0 : -1.5;
          p.beta = beta;
          const double err = run_problem(p, kind, ++seed);
          EXPECT_LT(err, tolerance(kind)) << kind_name(kind) << " M=" << p.M << " N=" << p.N << " K=" << p.K
                                          << " ta=" << p.ta << " tb=" << p.tb << " pad=" << pad << " beta=" << beta;
        }
}

TEST_F(CudaGemm, Float32ExactMatchesReferenceForEveryTransposeAndOddSizes) { check_kind(Kind::F32); }
TEST_F(CudaGemm, Tf32MatchesReferenceWithinTf32Tolerance) { check_kind(Kind::TF32); }
TEST_F(CudaGemm, Float64MatchesReference) { check_kind(Kind::F64); }
TEST_F(CudaGemm, BFloat16MatchesReferenceWithFloatAccumulation) { check_kind(Kind::BF16); }

TEST_F(CudaGemm, StridedBatchesWithBroadcastOperands) {
  for (Kind kind : {Kind::F32, Kind::F64, Kind::BF16}) {
    uint64_t seed = 7000 + uint64_t(kind) * 100;
    for (int t = 0; t < 4; ++t)
      for (int mode = 0; mode < 4; ++mode) {
        Problem p;
        p.batch = 5;
        p.ta = t & 1;
        p.tb = t & 2;
        p.M = 19;
        p.N = 23;
        p.K = 31;
        p.pad = mode == 3 ? 2 : 0;
        p.broadcast_a = mode == 1;
        p.broadcast_b = mode == 2;
        p.beta = mode == 3 ? 0.5 : 0.0;
        const double err = run_problem(p, kind, ++seed);
        EXPECT_LT(err, tolerance(kind)) << kind_name(kind) << " ta=" << p.ta << " tb=" << p.tb << " mode=" << mode;
      }
  }
}

TEST_F(CudaGemm, SharedOutputAccumulatesMatrixAfterMatrixLikeTheCpu) {
  for (Kind kind : {Kind::F32, Kind::F64}) {
    Problem p;
    p.batch = 4;
    p.M = 9;
    p.N = 10;
    p.K = 11;
    p.shared_c = true;
    p.beta = 1.0;
    EXPECT_LT(run_problem(p, kind, 42), tolerance(kind)) << kind_name(kind);
  }
}

TEST_F(CudaGemm, DegenerateSizesAndScalarsFollowTheCpuSemantics) {
  for (Kind kind : {Kind::F32, Kind::F64, Kind::BF16}) {
    uint64_t seed = 9000 + uint64_t(kind) * 100;
    for (int64_t batch : {1, 3}) {
      // K == 0: C = beta * C (beta == 0: zeros written over NaN).
      for (double beta : {0.0, 1.0, 2.0}) {
        Problem p;
        p.batch = batch;
        p.M = 6;
        p.N = 5;
        p.K = 0;
        p.pad = 1;
        p.beta = beta;
        EXPECT_LT(run_problem(p, kind, ++seed), tolerance(kind)) << kind_name(kind) << " K=0 beta=" << beta;
      }
      // alpha == 0: A (NaN here) is not read.
      for (double beta : {0.0, 0.5}) {
        Problem p;
        p.batch = batch;
        p.M = 6;
        p.N = 5;
        p.K = 4;
        p.alpha = 0.0;
        p.beta = beta;
        p.nan_a = true;
        EXPECT_LT(run_problem(p, kind, ++seed), tolerance(kind)) << kind_name(kind) << " alpha=0 beta=" << beta;
      }
      // M == 0 or N == 0: nothing is written.
      for (int which = 0; which < 2; ++which) {
        Problem p;
        p.batch = batch;
        p.M = which == 0 ? 0 : 4;
        p.N = which == 0 ? 4 : 0;
        p.K = 3;
        EXPECT_LT(run_problem(p, kind, ++seed), tolerance(kind)) << kind_name(kind) << " empty " << which;
      }
    }
  }
}

double rel_err(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  const std::vector<double> b = want.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

TEST_F(CudaGemm, MatmulOpRunsOnTheGpu) {
  Generator gen(5);
  const Device gpu = Device::cuda(0);
  struct Shapes { Shape a, b; };
  const Shapes cases[] = {{{5, 7}, {7, 11}}, {{3, 5, 7}, {7, 4}}, {{3, 5, 7}, {3, 7, 4}}, {{5, 7}, {3, 7, 4}}};
  for (const Shapes& c : cases) {
    const Tensor a = randn(c.a, {}, &gen), b = randn(c.b, {}, &gen);
    const Tensor want = ops::matmul(a.to(DType::Float64), b.to(DType::Float64));
    const Tensor got = ops::matmul(a.to(gpu), b.to(gpu));
    EXPECT_TRUE(got.is_cuda());
    EXPECT_EQ(got.shape(), want.shape());
    EXPECT_LT(rel_err(got, want), 1e-5) << shape_str(c.a) << " x " << shape_str(c.b);
  }
  // Transposed views are absorbed by the GEMM.
  const Tensor a = randn({6, 9}, {}, &gen), bt = randn({8, 9}, {}, &gen);
  const Tensor want = ops::matmul(a.to(DType::Float64), bt.to(DType::Float64).mT());
  EXPECT_LT(rel_err(ops::matmul(a.to(gpu), bt.to(gpu).mT()), want), 1e-5);
}

TEST_F(CudaGemm, MatmulOpRunsBFloat16Natively) {
  Generator gen(6);
  const Device gpu = Device::cuda(0);
  const Tensor a = randn({4, 33, 40}, {}, &gen).to(DType::BFloat16), b = randn({4, 40, 24}, {}, &gen).to(DType::BFloat16);
  const Tensor got = ops::matmul(a.to(gpu), b.to(gpu));
  EXPECT_EQ(got.dtype(), DType::BFloat16);
  const Tensor want = ops::matmul(a.to(DType::Float64), b.to(DType::Float64));
  EXPECT_LT(rel_err(got, want), 1e-2);
}

TEST_F(CudaGemm, MatmulOpRefusesMixedDevices) {
  const Tensor a = ones({2, 3}), b = ones({3, 2}, TensorOptions{}.with_device(Device::cuda(0)));
  EXPECT_THROW(ops::matmul(a, b), Error);
}

}  // namespace
}  // namespace uoe
