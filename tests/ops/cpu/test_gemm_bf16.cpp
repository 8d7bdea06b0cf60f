// Tests for uoe::cpu::gemm_bf16 / gemm_batched_bf16 on every bfloat16 path (AMX, AVX512-BF16, float32) against a
// float64 reference computed from the same bfloat16 inputs.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_isa.h"
#include "ops/kernels/gemm.h"
#if defined(__x86_64__)
#include "ops/cpu/gemm_avx512_blocks.h"
#endif

namespace {

using uoe::BFloat16;
using uoe::cpu::detail::Bf16Isa;

constexpr double kMaxRelError = 1e-5;  // |C - reference| / sum_k |a*b| (+ |beta*c|), float32 accumulation

std::vector<BFloat16> random_bf16(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<BFloat16> v(n);
  for (auto& x : v) x = BFloat16(dist(rng));
  return v;
}

// op(A) [M,K], op(B) [K,N], C [M,N] (float32) with leading dims padded by `pad`.
struct Problem {
  bool ta, tb;
  int64_t M, N, K, lda, ldb, ldc;
  std::vector<BFloat16> A, B;
  std::vector<float> C;

  Problem(bool ta_, bool tb_, int64_t M_, int64_t N_, int64_t K_, int64_t pad, uint32_t seed)
      : ta(ta_), tb(tb_), M(M_), N(N_), K(K_) {
    lda = (ta ? M : K) + pad;
    ldb = (tb ? K : N) + pad;
    ldc = N + pad;
    A = random_bf16(size_t(std::max<int64_t>((ta ? K : M) * lda, 1)), seed);
    B = random_bf16(size_t(std::max<int64_t>((tb ? N : K) * ldb, 1)), seed + 1);
    C.resize(size_t(std::max<int64_t>(M * ldc, 1)));
    const auto c = random_bf16(C.size(), seed + 2);
    std::copy(c.begin(), c.end(), C.begin());
  }
  double a(int64_t i, int64_t k) const { return double(ta ? A[size_t(k * lda + i)] : A[size_t(i * lda + k)]); }
  double b(int64_t k, int64_t j) const { return double(tb ? B[size_t(j * ldb + k)] : B[size_t(k * ldb + j)]); }
  std::string describe() const {
    return "M=" + std::to_string(M) + " N=" + std::to_string(N) + " K=" + std::to_string(K) +
           " ta=" + std::to_string(ta) + " tb=" + std::to_string(tb) + " lda=" + std::to_string(lda) +
           " ldb=" + std::to_string(ldb);
  }

  // Reference alpha*op(A)*op(B) + beta*C[i,j] and its error scale alpha*sum|a*b| + |beta*c|.
  void reference(int64_t i, int64_t j, double alpha, double beta, double c, double& ref, double& scale) const {
    double s = 0, sa = 0;
    for (int64_t k = 0; k < K; ++k) {
      s += a(i, k) * b(k, j);
      sa += std::fabs(a(i, k) * b(k, j));
    }
    ref = alpha * s + (beta == 0 ? 0.0 : beta * c);
    scale = std::fabs(alpha) * sa + std::fabs(beta * c) + 1e-30;
  }
};

// Runs the float32-C GEMM and checks every element against the reference and the padding of C untouched.
void check_f32(const Problem& p, float alpha, float beta) {
  std::vector<float> C = p.C;
  uoe::cpu::gemm_bf16<float>(p.ta, p.tb, p.M, p.N, p.K, alpha, p.A.data(), p.lda, p.B.data(), p.ldb, beta, C.data(),
                             p.ldc);
  double worst = 0;
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.ldc; ++j) {
      const size_t idx = size_t(i * p.ldc + j);
      if (j >= p.N) {
        EXPECT_EQ(std::memcmp(&C[idx], &p.C[idx], sizeof(float)), 0) << "padding overwritten, " << p.describe();
        continue;
      }
      double ref, scale;
      p.reference(i, j, alpha, beta, p.C[idx], ref, scale);
      worst = std::max(worst, std::fabs(double(C[idx]) - ref) / scale);
    }
  EXPECT_LE(worst, kMaxRelError) << p.describe() << " alpha=" << alpha << " beta=" << beta;
}

// bfloat16 C: the float32 result rounded once (half a bfloat16 ulp, 2^-9 relative) on top of the float32 error.
void check_bf16_out(const Problem& p, float beta) {
  std::vector<BFloat16> C(p.C.size());
  for (size_t i = 0; i < C.size(); ++i) C[i] = BFloat16(p.C[i]);
  uoe::cpu::gemm_bf16<BFloat16>(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, beta,
                                C.data(), p.ldc);
  for (int64_t i = 0; i < p.M; ++i)
    for (int64_t j = 0; j < p.N; ++j) {
      const size_t idx = size_t(i * p.ldc + j);
      double ref, scale;
      p.reference(i, j, 1.0, beta, double(BFloat16(p.C[idx])), ref, scale);
      ASSERT_LE(std::fabs(double(C[idx]) - ref), std::ldexp(std::fabs(ref), -8) + kMaxRelError * scale)
          << p.describe() << " at (" << i << "," << j << ")";
    }
}

struct Size {
  int64_t M, N, K;
};
// Odd and round sizes, 1..1000, square and not; K past one cache block (1024) in the last ones.
const Size kSizes[] = {{1, 1, 1},      {15, 15, 15},   {17, 17, 17},  {33, 33, 33},   {1, 15, 17},
                       {15, 17, 33},   {33, 1, 15},    {17, 33, 1},   {1000, 17, 15}, {15, 1000, 33},
                       {33, 17, 1000}, {17, 1, 1000},  {1000, 33, 1}, {61, 65, 2100}, {200, 70, 1030}};

class GemmBf16Test : public ::testing::TestWithParam<Bf16Isa> {
 protected:
  void SetUp() override {
    namespace d = uoe::cpu::detail;
    if (!d::gemm_bf16_isa_supported(GetParam())) {
      if (GetParam() == Bf16Isa::Amx)
        GTEST_SKIP() << "AMX not available on this machine (no AMX-BF16 in CPUID, or Linux refused the tile "
                        "permission): the AMX bfloat16 GEMM path was not run";
      GTEST_SKIP() << "AVX512-BF16 not available on this CPU: the avx512_bf16 GEMM path was not run";
    }
    ASSERT_TRUE(d::gemm_bf16_force_isa(GetParam()));
    ASSERT_EQ(d::gemm_bf16_active_isa(), GetParam());
    std::cout << "[ bf16 GEMM path: " << d::bf16_isa_name(GetParam()) << " ]\n";
    RecordProperty("bf16_gemm_path", d::bf16_isa_name(GetParam()));
  }
  void TearDown() override { uoe::cpu::detail::gemm_bf16_force_isa(Bf16Isa::Auto); }
};

TEST_P(GemmBf16Test, SizesAndTransposes) {
  uint32_t seed = 1;
  for (const Size& s : kSizes)
    for (int t = 0; t < 4; ++t) check_f32(Problem(t & 1, t & 2, s.M, s.N, s.K, 0, seed += 3), 1.0f, 0.0f);
}

// Padded leading dims (odd ones split the k pairs across 32-bit words), alpha and beta.
TEST_P(GemmBf16Test, StridedOperandsAlphaBeta) {
  uint32_t seed = 100;
  const float ab[][2] = {{1.0f, 1.0f}, {-0.75f, 0.0f}, {2.5f, -0.5f}, {0.0f, 0.25f}};
  for (const Size& s : {Size{17, 33, 65}, Size{45, 67, 390}, Size{1, 40, 3}})
    for (int t = 0; t < 4; ++t)
      for (int64_t pad : {1, 2, 7})
        for (const auto& v : ab) check_f32(Problem(t & 1, t & 2, s.M, s.N, s.K, pad, seed += 3), v[0], v[1]);
}

TEST_P(GemmBf16Test, KZeroScalesC) {
  check_f32(Problem(false, false, 9, 11, 0, 2, 7), 1.0f, 0.5f);
  check_f32(Problem(true, true, 9, 11, 0, 2, 8), 1.0f, 0.0f);
}

TEST_P(GemmBf16Test, BFloat16Output) {
  uint32_t seed = 200;
  for (int t = 0; t < 4; ++t) {
    check_bf16_out(Problem(t & 1, t & 2, 33, 17, 1000, 1, seed += 3), 0.0f);
    check_bf16_out(Problem(t & 1, t & 2, 15, 40, 64, 0, seed += 3), 1.0f);
    // large enough for several threads and units, each rounding its own block of C
    check_bf16_out(Problem(t & 1, t & 2, 300, 257, 511, 1, seed += 3), t < 2 ? 0.0f : 0.5f);
  }
}

// A bfloat16 C wider than one pass's float32 result (64 MiB: 3000 x 6000 floats are 69 MiB) runs in passes of rows;
// every element is still the float32 product rounded once.
TEST_P(GemmBf16Test, WideBFloat16OutputInRowPassesIsTheRoundedFloatProduct) {
  for (int t = 0; t < 4; ++t) {
    const Problem p(t & 1, t & 2, 3000, 6000, 5, 0, 700 + 3 * uint32_t(t));
    const float beta = t < 2 ? 0.0f : 0.5f;
    std::vector<float> f32(p.C.size(), 0.0f);
    uoe::cpu::gemm_bf16<float>(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                               f32.data(), p.ldc);
    std::vector<BFloat16> C(p.C.size()), want(p.C.size());
    for (size_t i = 0; i < C.size(); ++i) {
      C[i] = BFloat16(p.C[i]);
      want[i] = BFloat16(f32[i] + beta * float(C[i]));
    }
    uoe::cpu::gemm_bf16<BFloat16>(p.ta, p.tb, p.M, p.N, p.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, beta,
                                  C.data(), p.ldc);
    EXPECT_EQ(std::memcmp(C.data(), want.data(), C.size() * sizeof(BFloat16)), 0) << p.describe();
  }
}

// With beta 0 the AVX512-BF16 kernels round C from their registers in the last K block (the blocks before it sum in
// float32): the bits of the float32 product rounded once, for every size (K over one, two and three blocks), both
// transposes of each operand, padded leading dimensions and an alpha other than 1.
TEST_P(GemmBf16Test, BFloat16OutputIsTheFloatProductRoundedOnce) {
  uint32_t seed = 1300;
  for (const Size& s : kSizes)
    for (int t = 0; t < 4; ++t) {
      const Problem p(t & 1, t & 2, s.M, s.N, s.K, t & 1, seed += 3);
      std::vector<float> f32(p.C.size(), 0.0f);
      uoe::cpu::gemm_bf16<float>(p.ta, p.tb, p.M, p.N, p.K, 0.75f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                                 f32.data(), p.ldc);
      std::vector<BFloat16> C(p.C.size()), want(p.C.size());
      for (size_t i = 0; i < C.size(); ++i) {
        C[i] = BFloat16(p.C[i]);  // the padding keeps these
        want[i] = int64_t(i) % p.ldc < p.N ? BFloat16(f32[i]) : C[i];
      }
      uoe::cpu::gemm_bf16<BFloat16>(p.ta, p.tb, p.M, p.N, p.K, 0.75f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                                    C.data(), p.ldc);
      EXPECT_EQ(std::memcmp(C.data(), want.data(), C.size() * sizeof(BFloat16)), 0) << p.describe();
    }
}

// A not transposed with an even depth is read in place by the AVX512-BF16 kernel, a transposed A is packed first:
// the same product either way gives the same bits (every C element is one chain over the pairs in order), across
// several K blocks and padded (odd) leading dimensions.
TEST_P(GemmBf16Test, AReadInPlaceGivesTheBitsOfAPacked) {
  uint32_t seed = 900;
  for (const Size& s : {Size{29, 70, 64}, Size{300, 33, 2100}, Size{15, 1000, 1030}})
    for (int64_t pad : {0, 1}) {
      const Problem p(false, false, s.M, s.N, s.K, pad, seed += 3);
      std::vector<BFloat16> at(size_t(s.K * s.M));  // A transposed: [K, M]
      for (int64_t i = 0; i < s.M; ++i)
        for (int64_t k = 0; k < s.K; ++k) at[size_t(k * s.M + i)] = p.A[size_t(i * p.lda + k)];
      std::vector<float> in_place = p.C, packed = p.C;
      uoe::cpu::gemm_bf16<float>(false, false, s.M, s.N, s.K, 1.0f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                                 in_place.data(), p.ldc);
      uoe::cpu::gemm_bf16<float>(true, false, s.M, s.N, s.K, 1.0f, at.data(), s.M, p.B.data(), p.ldb, 0.0f,
                                 packed.data(), p.ldc);
      EXPECT_EQ(std::memcmp(in_place.data(), packed.data(), packed.size() * sizeof(float)), 0) << p.describe();
    }
}

TEST_P(GemmBf16Test, ThreadCountIndependence) {
  const int saved = omp_get_max_threads();
  uint32_t seed = 300;
  for (const Size& s : {Size{300, 257, 511}, Size{97, 1000, 1100}, Size{2, 2000, 50}, Size{515, 3, 777}})
    for (int t = 0; t < 4; ++t) {
      const Problem p(t & 1, t & 2, s.M, s.N, s.K, 1, seed += 3);
      std::vector<std::vector<float>> out;
      for (int nt : {1, 2, 3}) {
        omp_set_num_threads(nt);
        std::vector<float> C = p.C;
        uoe::cpu::gemm_bf16<float>(p.ta, p.tb, p.M, p.N, p.K, 1.25f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.5f,
                                   C.data(), p.ldc);
        out.push_back(std::move(C));
      }
      for (size_t i = 1; i < out.size(); ++i)
        EXPECT_EQ(std::memcmp(out[0].data(), out[i].data(), out[0].size() * sizeof(float)), 0) << p.describe();
    }
  omp_set_num_threads(saved);
}

// Matrix b of a batch equals a standalone GEMM on its slices bit for bit, with broadcast (stride 0) operands, on
// the over-the-batch (small) and inside-the-GEMM (large) routes.
void check_batched(int64_t batch, bool ta, bool tb, int64_t M, int64_t N, int64_t K, bool bcast_a, bool bcast_b,
                   uint32_t seed) {
  const int64_t lda = (ta ? M : K) + 2, ldb = (tb ? K : N) + 1, ldc = N + 3;
  const int64_t sa = bcast_a ? 0 : (ta ? K : M) * lda, sb = bcast_b ? 0 : (tb ? N : K) * ldb, sc = M * ldc + 5;
  const auto A = random_bf16(size_t(std::max<int64_t>(sa * batch, (ta ? K : M) * lda)), seed);
  const auto B = random_bf16(size_t(std::max<int64_t>(sb * batch, (tb ? N : K) * ldb)), seed + 1);
  std::vector<BFloat16> C(size_t(sc * batch)), E(C.size());
  uoe::cpu::gemm_batched_bf16<BFloat16>(batch, ta, tb, M, N, K, 0.5f, A.data(), lda, sa, B.data(), ldb, sb, 0.0f,
                                        C.data(), ldc, sc);
  for (int64_t b = 0; b < batch; ++b)
    uoe::cpu::gemm_bf16<BFloat16>(ta, tb, M, N, K, 0.5f, A.data() + b * sa, lda, B.data() + b * sb, ldb, 0.0f,
                                  E.data() + b * sc, ldc);
  EXPECT_EQ(std::memcmp(C.data(), E.data(), C.size() * sizeof(BFloat16)), 0)
      << "batch=" << batch << " M=" << M << " N=" << N << " K=" << K;
}

TEST_P(GemmBf16Test, Batched) {
  uint32_t seed = 400;
  for (int t = 0; t < 4; ++t)
    for (int bc = 0; bc < 3; ++bc) {
      check_batched(7, t & 1, t & 2, 9, 13, 21, bc == 1, bc == 2, seed += 4);
      check_batched(3, t & 1, t & 2, 200, 210, 400, bc == 1, bc == 2, seed += 4);
    }
}

std::string path_name(const ::testing::TestParamInfo<Bf16Isa>& info) {
  return uoe::cpu::detail::bf16_isa_name(info.param);
}

INSTANTIATE_TEST_SUITE_P(AllPaths, GemmBf16Test, ::testing::Values(Bf16Isa::F32, Bf16Isa::Avx512Bf16, Bf16Isa::Amx),
                         path_name);

// The float32 path runs the float GEMM's kernels, their packing widening each operand element as it reads it: bit
// for bit the float GEMM of the widened operands, on every float ISA this CPU runs (their packings differ), at odd
// sizes, several threads' units and K past one block. A bfloat16 C (rounded in the registers by the AVX-512 and
// AVX2 kernels) is that float product rounded once, also where it overflows to infinity or is NaN.
TEST(GemmBf16F32Path, EqualsTheFloatGemmOfTheWidenedOperandsOnEveryFloatIsa) {
  namespace d = uoe::cpu::detail;
  ASSERT_TRUE(d::gemm_bf16_force_isa(Bf16Isa::F32));
  const auto widened = [](const std::vector<BFloat16>& x) { return std::vector<float>(x.begin(), x.end()); };
  uint32_t seed = 500;
  for (const auto& [isa, name] : {std::pair{d::GemmIsa::Scalar, "scalar"}, std::pair{d::GemmIsa::Avx2, "avx2"},
                                  std::pair{d::GemmIsa::Avx512, "avx512"}}) {
    if (!d::gemm_force_isa(isa)) {
      std::cout << "[ float GEMM path " << name << " not available on this CPU: not run ]\n";
      continue;
    }
    std::cout << "[ float GEMM path " << name << " ]\n";
    for (const Size& s : {Size{1, 1, 1}, Size{17, 33, 15}, Size{300, 257, 511}, Size{61, 65, 2100}})
      for (int t = 0; t < 8; ++t) {
        Problem p(t & 1, t & 2, s.M, s.N, s.K, 1, seed += 3);
        if (t & 4) {  // huge values (sums past FLT_MAX), infinities (inf - inf: NaN) and NaNs among the operands
          for (size_t i = 0; i < p.A.size(); i += 7) p.A[i] = BFloat16(3e38f);
          for (size_t i = 3; i < p.A.size(); i += 101) p.A[i] = BFloat16(-std::numeric_limits<float>::infinity());
          for (size_t i = 5; i < p.B.size(); i += 211) p.B[i] = BFloat16(std::numeric_limits<float>::quiet_NaN());
        }
        std::vector<float> got = p.C, want = p.C;
        uoe::cpu::gemm_bf16<float>(p.ta, p.tb, p.M, p.N, p.K, 1.25f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.5f,
                                   got.data(), p.ldc);
        uoe::cpu::gemm<float>(p.ta, p.tb, p.M, p.N, p.K, 1.25f, widened(p.A).data(), p.lda, widened(p.B).data(),
                              p.ldb, 0.5f, want.data(), p.ldc, "test");
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0) << p.describe() << " " << name;

        std::vector<BFloat16> got16(p.C.size());
        std::vector<float> want32(p.C.size());
        uoe::cpu::gemm_bf16<BFloat16>(p.ta, p.tb, p.M, p.N, p.K, 1.25f, p.A.data(), p.lda, p.B.data(), p.ldb, 0.0f,
                                      got16.data(), p.ldc);
        uoe::cpu::gemm<float>(p.ta, p.tb, p.M, p.N, p.K, 1.25f, widened(p.A).data(), p.lda, widened(p.B).data(),
                              p.ldb, 0.0f, want32.data(), p.ldc, "test");
        int bad = 0;
        for (int64_t i = 0; i < p.M; ++i)
          for (int64_t j = 0; j < p.N; ++j) {
            const size_t at = size_t(i * p.ldc + j);
            if (got16[at].bits != uoe::float_to_bf16_bits(want32[at]) && ++bad <= 3)
              ADD_FAILURE() << p.describe() << " " << name << ": bfloat16 C[" << i << "," << j << "] bits "
                            << got16[at].bits << ", the float product " << want32[at] << " rounds to "
                            << uoe::float_to_bf16_bits(want32[at]);
          }
      }
  }
  d::gemm_force_isa(d::GemmIsa::Auto);
  d::gemm_bf16_force_isa(Bf16Isa::Auto);
}

#if defined(__x86_64__)
UOE_AVX512 void round16_avx512(const uint32_t* in, uint16_t* out) {
  const __m512 x = _mm512_castsi512_ps(_mm512_loadu_si512(in));
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), uoe::cpu::detail::avx512::round_to_bf16(x));
}

// The AVX-512 float kernels round a bfloat16 C in their registers (the f32 path's micro_bf16_out): the bits of
// float_to_bf16_bits for every kind of float: zeros, subnormals, ties to even either way, carries into the exponent
// and to infinity, infinities, quiet and signalling NaNs of either sign, and random bit patterns.
TEST(GemmBf16F32Path, RegisterRoundingIsFloatToBf16Bits) {
  if (!__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw"))
    GTEST_SKIP() << "AVX-512 not available on this CPU: the AVX-512 float kernels' rounding was not run";
  std::vector<uint32_t> bits = {0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00008000, 0x00018000,
                                0x00800000, 0x3f808000, 0x3f818000, 0x3f80ffff, 0x3f807fff, 0x7f7fffff,
                                0xff7f8000, 0x7f7f7fff, 0x7f800000, 0xff800000, 0x7fc00000, 0xffc00001,
                                0x7f800001, 0xff80ffff, 0x7fffffff, 0x3fffffff, 0x4effffff, 0xc0000000};
  std::mt19937 rng(77);
  while (bits.size() % 16 != 0 || bits.size() < 4096) bits.push_back(rng());
  for (size_t i = 0; i < bits.size(); i += 16) {
    uint16_t got[16];
    round16_avx512(bits.data() + i, got);
    for (size_t j = 0; j < 16; ++j) {
      float f;
      std::memcpy(&f, &bits[i + j], sizeof(f));
      EXPECT_EQ(got[j], uoe::float_to_bf16_bits(f)) << std::hex << "float bits 0x" << bits[i + j];
    }
  }
}
#endif

TEST(GemmBf16Isa, AutoPicksTheBestPathThisCpuRuns) {
  namespace d = uoe::cpu::detail;
  if (std::getenv("UOE_PIN_ISA")) GTEST_SKIP() << "UOE_PIN_ISA is set: it picks the path";
  d::gemm_bf16_force_isa(Bf16Isa::Auto);
  const Bf16Isa active = d::gemm_bf16_active_isa();
  std::cout << "[ bf16 GEMM path chosen: " << d::bf16_isa_name(active) << " ]\n";
  EXPECT_EQ(active, d::preferred_bf16_isa(d::gemm_bf16_isa_supported(Bf16Isa::Amx),
                                          d::gemm_bf16_isa_supported(Bf16Isa::Avx512Bf16),
                                          __builtin_cpu_is("intel")));
}

// AMX first; AVX512-BF16 only where it beats the float32 kernels (not on Intel); else float32.
TEST(GemmBf16Isa, PreferenceOrder) {
  namespace d = uoe::cpu::detail;
  for (bool intel : {false, true}) {
    EXPECT_EQ(d::preferred_bf16_isa(true, true, intel), Bf16Isa::Amx);
    EXPECT_EQ(d::preferred_bf16_isa(false, false, intel), Bf16Isa::F32);
  }
  EXPECT_EQ(d::preferred_bf16_isa(false, true, false), Bf16Isa::Avx512Bf16);
  EXPECT_EQ(d::preferred_bf16_isa(false, true, true), Bf16Isa::F32);
}

}  // namespace
