// Tests for uoe::cpu::gemm / gemm_batched against a naive double-precision reference, on every ISA path.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/simd.h"
#include "ops/cpu/gemm_isa.h"
#include "ops/kernels/gemm.h"

namespace {

using uoe::cpu::detail::GemmIsa;

struct Shape {
  int64_t M, N, K;
};

template <typename T>
std::vector<T> random_vec(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<T> v(n);
  for (auto& x : v) {
    double d = dist(rng);
    if (std::fabs(d) < 1e-3) d = 0.5;  // never zero
    x = T(d);
  }
  return v;
}

// A problem with storage for op(A) [M,K], op(B) [K,N], C [M,N] and padded leading dims.
template <typename T>
struct Problem {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  std::vector<T> A, B, C;

  Problem(bool ta_, bool tb_, int64_t M_, int64_t N_, int64_t K_, int64_t pad, uint32_t seed)
      : ta(ta_), tb(tb_), M(M_), N(N_), K(K_) {
    const int64_t a_rows = ta ? K : M, a_cols = ta ? M : K;
    const int64_t b_rows = tb ? N : K, b_cols = tb ? K : N;
    lda = a_cols + pad;
    ldb = b_cols + pad;
    ldc = N + pad;
    A = random_vec<T>(size_t(std::max<int64_t>(a_rows * lda, 1)), seed);
    B = random_vec<T>(size_t(std::max<int64_t>(b_rows * ldb, 1)), seed + 1);
    C = random_vec<T>(size_t(std::max<int64_t>(M * ldc, 1)), seed + 2);
  }
  double a(int64_t i, int64_t k) const { return double(ta ? A[k * lda + i] : A[i * lda + k]); }
  double b(int64_t k, int64_t j) const { return double(tb ? B[j * ldb + k] : B[k * ldb + j]); }

  // Reference result and a per-element error scale (alpha*sum|a*b| + |beta*c|).
  void reference(double alpha, double beta, std::vector<double>& ref, std::vector<double>& scale) const {
    ref.assign(C.size(), 0.0);
    scale.assign(C.size(), 0.0);
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double s = 0, sa = 0;
        for (int64_t k = 0; k < K; ++k) {
          s += a(i, k) * b(k, j);
          sa += std::fabs(a(i, k) * b(k, j));
        }
        const double c = beta == 0 ? 0.0 : beta * double(C[i * ldc + j]);
        ref[i * ldc + j] = alpha * s + c;
        scale[i * ldc + j] = std::fabs(alpha) * sa + std::fabs(c);
      }
  }
};

// Runs gemm on a copy of C and checks every element of the MxN window against the reference,
// and that the padding columns of C are untouched.
template <typename T>
void check_gemm(const Problem<T>& p, T alpha, T beta, bool nan_c = false) {
  std::vector<double> ref, scale;
  p.reference(double(alpha), double(beta), ref, scale);
  std::vector<T> C = p.C;
  if (nan_c)
    for (int64_t i = 0; i < p.M; ++i)
      for (int64_t j = 0; j < p.N; ++j) C[i * p.ldc + j] = std::numeric_limits<T>::quiet_NaN();
  uoe::cpu::gemm<T>(p.ta, p.tb, p.M, p.N, p.K, alpha, p.A.data(), p.lda, p.B.data(), p.ldb, beta, C.data(), p.ldc);
  const double eps = std::numeric_limits<T>::epsilon();
  const double tol = 2.0 * double(p.K + 4) * eps;
  int64_t bad = 0;
  for (int64_t i = 0; i < p.M; ++i) {
    for (int64_t j = 0; j < p.ldc; ++j) {
      const size_t idx = size_t(i * p.ldc + j);
      if (j >= p.N) {
        if (std::memcmp(&C[idx], &p.C[idx], sizeof(T)) != 0 && bad++ < 5)
          ADD_FAILURE() << "padding overwritten at (" << i << "," << j << ")";
        continue;
      }
      const double err = std::fabs(double(C[idx]) - ref[idx]);
      if (!(err <= tol * scale[idx] + 1e-30) && bad++ < 5)
        ADD_FAILURE() << "M=" << p.M << " N=" << p.N << " K=" << p.K << " ta=" << p.ta << " tb=" << p.tb
                      << " alpha=" << alpha << " beta=" << beta << " at (" << i << "," << j << "): got " << C[idx]
                      << " want " << ref[idx];
    }
  }
  EXPECT_EQ(bad, 0);
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

const Shape kShapes[] = {
    {1, 1, 1},     {17, 33, 65},  {0, 5, 7},     {5, 0, 7},     {5, 7, 0},     {0, 0, 0},
    {1, 100, 1},   {1, 77, 1},    {100, 1, 1},   {1, 1, 100},   {1, 129, 300}, {129, 1, 300},
    {13, 31, 17},  {14, 32, 16},  {15, 33, 18},  {6, 16, 8},    {7, 17, 9},    {5, 15, 7},
    {4, 8, 3},     {28, 64, 255}, {29, 65, 257}, {27, 63, 511}, {16, 40, 513}, {28, 64, 1023},
    {29, 65, 1024}, {27, 63, 1025}, {42, 96, 2100}, {335, 40, 20}, {336, 33, 21}, {337, 31, 22},
    {3, 4097, 5},  {2, 4130, 9},  {20, 3000, 200}, {5, 2100, 2048}, {300, 257, 511}};

// ---------------------------------------------------------------------------------------------
// float, every ISA path
// ---------------------------------------------------------------------------------------------
class GemmIsaTest : public ::testing::TestWithParam<GemmIsa> {
 protected:
  void SetUp() override {
    if (!uoe::cpu::detail::gemm_isa_supported(GetParam())) GTEST_SKIP() << "ISA not supported on this CPU";
    ASSERT_TRUE(uoe::cpu::detail::gemm_force_isa(GetParam()));
    ASSERT_EQ(uoe::cpu::detail::gemm_active_isa(), GetParam());
  }
  void TearDown() override { uoe::cpu::detail::gemm_force_isa(GemmIsa::Auto); }
};

TEST_P(GemmIsaTest, ShapesAndTransposes) {
  uint32_t seed = 1;
  for (const Shape& s : kShapes)
    for (int t = 0; t < 4; ++t) {
      Problem<float> p(t & 1, t & 2, s.M, s.N, s.K, 0, seed++);
      check_gemm<float>(p, 1.0f, 0.0f);
    }
}

TEST_P(GemmIsaTest, AlphaBetaVariants) {
  const float ab[][2] = {{1.0f, 1.0f}, {-0.75f, 0.0f}, {2.5f, -0.5f}, {0.5f, 1.0f}, {0.0f, 0.25f}, {0.0f, 0.0f}};
  uint32_t seed = 100;
  for (const Shape& s : {Shape{17, 33, 65}, Shape{29, 70, 400}, Shape{1, 1, 1}})
    for (int t = 0; t < 4; ++t)
      for (const auto& v : ab) {
        Problem<float> p(t & 1, t & 2, s.M, s.N, s.K, 0, seed++);
        check_gemm<float>(p, v[0], v[1]);
      }
}

TEST_P(GemmIsaTest, LeadingDimsLargerThanWidth) {
  uint32_t seed = 200;
  for (const Shape& s : {Shape{17, 33, 65}, Shape{45, 67, 390}, Shape{1, 40, 3}})
    for (int t = 0; t < 4; ++t)
      for (int64_t pad : {1, 7, 19}) {
        Problem<float> p(t & 1, t & 2, s.M, s.N, s.K, pad, seed++);
        check_gemm<float>(p, 1.5f, 0.5f);
      }
}

TEST_P(GemmIsaTest, BetaZeroIgnoresNaNInC) {
  uint32_t seed = 300;
  for (const Shape& s : {Shape{17, 33, 65}, Shape{31, 47, 3}, Shape{4, 5, 0}})
    for (int t = 0; t < 4; ++t) {
      Problem<float> p(t & 1, t & 2, s.M, s.N, s.K, 3, seed++);
      check_gemm<float>(p, 0.75f, 0.0f, /*nan_c=*/true);
    }
}

TEST_P(GemmIsaTest, KZeroScalesC) {
  Problem<float> p(false, false, 9, 11, 0, 2, 7);
  check_gemm<float>(p, 1.0f, 0.5f);
  check_gemm<float>(p, 1.0f, 1.0f);
  check_gemm<float>(p, 1.0f, 0.0f, /*nan_c=*/true);
}

TEST_P(GemmIsaTest, ThreadCountIndependence) {
  const int saved = omp_get_max_threads();
  uint32_t seed = 400;
  for (const Shape& s : {Shape{300, 257, 511}, Shape{97, 1000, 1100}, Shape{2, 2000, 50}, Shape{515, 3, 777},
                         Shape{20, 3000, 200}, Shape{30, 2100, 2048}})
    for (int t = 0; t < 4; ++t) {
      Problem<float> p(t & 1, t & 2, s.M, s.N, s.K, 1, seed++);
      std::vector<std::vector<float>> out;
      for (int nt : {1, 2, 3}) {
        omp_set_num_threads(nt);
        std::vector<float> C = p.C;
        uoe::cpu::gemm<float>(p.ta, p.tb, p.M, p.N, p.K, 1.25f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.5f, C.data(),
                              p.ldc);
        out.push_back(std::move(C));
      }
      for (size_t i = 1; i < out.size(); ++i)
        EXPECT_TRUE(same_bits(out[0], out[i]))
            << "M=" << s.M << " N=" << s.N << " K=" << s.K << " t=" << t << " threads run " << i;
    }
  omp_set_num_threads(saved);
}

TEST_P(GemmIsaTest, InsideParallelRegionMatchesOutside) {
  Problem<float> p(false, true, 130, 140, 450, 0, 500);
  std::vector<float> expect = p.C;
  uoe::cpu::gemm<float>(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f, expect.data(),
                        p.ldc);
  std::vector<std::vector<float>> outs(4, p.C);
#pragma omp parallel for num_threads(2)
  for (int r = 0; r < 4; ++r)
    uoe::cpu::gemm<float>(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                          outs[size_t(r)].data(), p.ldc);
  for (const auto& o : outs) EXPECT_TRUE(same_bits(o, expect));
}

// Batched: matrix b must equal a standalone gemm on its slices (bit-for-bit), including broadcast
// (stride 0) operands, for both the over-batch (small) and inside-GEMM (large) paths.
template <typename T>
void check_batched(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool bcast_a, bool bcast_b,
                   uint32_t seed) {
  const int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
  const int64_t sa = bcast_a ? 0 : (ta ? K : M) * lda, sb = bcast_b ? 0 : (tb ? N : K) * ldb, sc = M * ldc + 5;
  const auto A = random_vec<T>(size_t(std::max<int64_t>(sa * batch, (ta ? K : M) * lda)), seed);
  const auto B = random_vec<T>(size_t(std::max<int64_t>(sb * batch, (tb ? N : K) * ldb)), seed + 1);
  const auto C0 = random_vec<T>(size_t(sc * batch), seed + 2);
  std::vector<T> C = C0, E = C0;
  const T alpha = T(0.5), beta = T(-1.5);
  uoe::cpu::gemm_batched<T>(batch, ta, tb, M, N, K, alpha, A.data(), lda, sa, B.data(), ldb, sb, beta, C.data(), ldc,
                            sc);
  for (int64_t b = 0; b < batch; ++b)
    uoe::cpu::gemm<T>(ta, tb, M, N, K, alpha, A.data() + b * sa, lda, B.data() + b * sb, ldb, beta,
                      E.data() + b * sc, ldc);
  EXPECT_TRUE(same_bits(C, E))
      << "batch=" << batch << " M=" << M << " N=" << N << " K=" << K;
  // And one matrix against the reference.
  Problem<T> p(ta, tb, M, N, K, 0, seed + 3);
  check_gemm<T>(p, alpha, beta);
}

TEST_P(GemmIsaTest, Batched) {
  uint32_t seed = 600;
  for (int t = 0; t < 4; ++t)
    for (int bc = 0; bc < 3; ++bc) {
      check_batched<float>(7, t & 1, t & 2, 9, 13, 21, bc == 1, bc == 2, seed += 4);
      check_batched<float>(3, t & 1, t & 2, 200, 210, 400, bc == 1, bc == 2, seed += 4);
    }
  check_batched<float>(0, false, false, 4, 4, 4, false, false, seed += 4);
  check_batched<float>(1, true, false, 40, 50, 60, false, false, seed += 4);
}

TEST_P(GemmIsaTest, BatchedThreadCountIndependence) {
  const int saved = omp_get_max_threads();
  const int64_t batch = 6, M = 20, N = 30, K = 40;
  const auto A = random_vec<float>(size_t(batch * M * K), 1);
  const auto B = random_vec<float>(size_t(K * N), 2);
  std::vector<std::vector<float>> outs;
  for (int nt : {1, 2, 4}) {
    omp_set_num_threads(nt);
    std::vector<float> C(size_t(batch * M * N), std::numeric_limits<float>::quiet_NaN());
    uoe::cpu::gemm_batched<float>(batch, false, false, M, N, K, 1.0f, A.data(), K, M * K, B.data(), N, 0, 0.0f,
                                  C.data(), N, M * N);
    outs.push_back(std::move(C));
  }
  for (size_t i = 1; i < outs.size(); ++i)
    EXPECT_TRUE(same_bits(outs[0], outs[i]));
  omp_set_num_threads(saved);
}

std::string isa_name(const ::testing::TestParamInfo<GemmIsa>& info) {
  switch (info.param) {
    case GemmIsa::Avx512: return "Avx512";
    case GemmIsa::Avx2: return "Avx2";
    case GemmIsa::Scalar: return "Scalar";
    default: return "Auto";
  }
}

INSTANTIATE_TEST_SUITE_P(AllIsas, GemmIsaTest,
                         ::testing::Values(GemmIsa::Scalar, GemmIsa::Avx2, GemmIsa::Avx512), isa_name);

// Auto: the best path this CPU runs, below AVX-512 in a build pinned to x86-64-v3 or lower (pinned_isa_level),
// which runs the kernels of a CPU of that level.
TEST(GemmIsa, AutoPicksBestSupported) {
  namespace d = uoe::cpu::detail;
  d::gemm_force_isa(GemmIsa::Auto);
  const GemmIsa active = d::gemm_active_isa();
  const int level = uoe::pinned_isa_level();
  const GemmIsa best = d::gemm_isa_supported(GemmIsa::Avx512) && level >= 4 ? GemmIsa::Avx512
                       : d::gemm_isa_supported(GemmIsa::Avx2) && level >= 3 ? GemmIsa::Avx2
                                                                            : GemmIsa::Scalar;
  std::cout << "[ float GEMM path chosen: " << isa_name({active, 0}) << ", build level cap " << level << " ]\n";
  EXPECT_EQ(active, best);
  EXPECT_TRUE(d::gemm_isa_supported(GemmIsa::Scalar));
}

// ---------------------------------------------------------------------------------------------
// double
// ---------------------------------------------------------------------------------------------
TEST(GemmDouble, ShapesTransposesAlphaBeta) {
  uint32_t seed = 700;
  for (const Shape& s : kShapes)
    for (int t = 0; t < 4; ++t) {
      Problem<double> p(t & 1, t & 2, s.M, s.N, s.K, t, seed++);
      check_gemm<double>(p, 1.0, 0.0);
      check_gemm<double>(p, -0.5, 1.5);
    }
}

TEST(GemmDouble, BetaZeroNaNAndKZero) {
  Problem<double> p(true, false, 23, 19, 31, 2, 800);
  check_gemm<double>(p, 2.0, 0.0, /*nan_c=*/true);
  Problem<double> q(false, true, 5, 6, 0, 1, 801);
  check_gemm<double>(q, 1.0, 0.0, /*nan_c=*/true);
  check_gemm<double>(q, 1.0, 3.0);
}

TEST(GemmDouble, ThreadCountIndependenceAndBatched) {
  const int saved = omp_get_max_threads();
  Problem<double> p(false, true, 150, 170, 300, 0, 900);
  std::vector<std::vector<double>> out;
  for (int nt : {1, 2}) {
    omp_set_num_threads(nt);
    std::vector<double> C = p.C;
    uoe::cpu::gemm<double>(p.ta, p.tb, p.M, p.N, p.K, 1.0, p.A.data(), p.lda, p.B.data(), p.ldb, 1.0, C.data(), p.ldc);
    out.push_back(std::move(C));
  }
  EXPECT_TRUE(same_bits(out[0], out[1]));
  omp_set_num_threads(saved);
  check_batched<double>(5, true, true, 11, 12, 13, true, false, 910);
  check_batched<double>(5, false, false, 11, 12, 13, false, true, 920);
}

}  // namespace
