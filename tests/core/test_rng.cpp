// Tests for core/rng.h: Philox4x32-10 known answers, stream mapping, statistics, determinism, Generator.
#include "core/rng.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

namespace {

using uoe::Philox;
using Ctr = std::array<uint32_t, 4>;
using Key = std::array<uint32_t, 2>;
constexpr double kPi = 3.14159265358979323846;

// Known-answer vectors for philox4x32 with 10 rounds, from Random123's tests/kat_vectors
// (format: counter[4] key[2] -> output[4]).
TEST(CorePhilox, KnownAnswerVectors) {
  EXPECT_EQ(Philox::block(Ctr{0, 0, 0, 0}, Key{0, 0}),
            (Ctr{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(Philox::block(Ctr{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu},
                          Key{0xffffffffu, 0xffffffffu}),
            (Ctr{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(Philox::block(Ctr{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u},
                          Key{0xa4093822u, 0x299f31d0u}),
            (Ctr{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
  // uoe's (seed, counter) form is the raw form with key = seed, counter = {c, 0, 0}.
  EXPECT_EQ(Philox::block(uint64_t{0}, uint64_t{0}), Philox::block(Ctr{0, 0, 0, 0}, Key{0, 0}));
}

// A second, deliberately different write-up of Philox4x32-10: keys precomputed per round, the
// 32x32 multiply split into 16-bit halves, and the output permutation written as a table.
Ctr reference_philox(Ctr x, Key k) {
  auto mulhilo = [](uint32_t a, uint32_t b, uint32_t& hi, uint32_t& lo) {
    const uint32_t al = a & 0xffffu, ah = a >> 16, bl = b & 0xffffu, bh = b >> 16;
    const uint32_t ll = al * bl, lh = al * bh, hl = ah * bl, hh = ah * bh;
    const uint32_t mid = (ll >> 16) + (lh & 0xffffu) + (hl & 0xffffu);
    lo = (ll & 0xffffu) | (mid << 16);
    hi = hh + (lh >> 16) + (hl >> 16) + (mid >> 16);
  };
  Key keys[10];
  keys[0] = k;
  for (int r = 1; r < 10; ++r) keys[r] = Key{keys[r - 1][0] + 0x9E3779B9u, keys[r - 1][1] + 0xBB67AE85u};
  for (int r = 0; r < 10; ++r) {
    uint32_t hi0, lo0, hi1, lo1;
    mulhilo(0xD2511F53u, x[0], hi0, lo0);
    mulhilo(0xCD9E8D57u, x[2], hi1, lo1);
    const Ctr prev = x;
    x[0] = hi1 ^ prev[1] ^ keys[r][0];
    x[1] = lo1;
    x[2] = hi0 ^ prev[3] ^ keys[r][1];
    x[3] = lo0;
  }
  return x;
}

TEST(CorePhilox, MatchesIndependentReimplementation) {
  EXPECT_EQ(reference_philox(Ctr{0, 0, 0, 0}, Key{0, 0}), Philox::block(Ctr{0, 0, 0, 0}, Key{0, 0}));
  std::mt19937_64 rng(99);
  for (int i = 0; i < 20000; ++i) {
    const uint64_t a = rng(), b = rng(), c = rng();
    const Ctr ctr{static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), static_cast<uint32_t>(b),
                  static_cast<uint32_t>(b >> 32)};
    const Key key{static_cast<uint32_t>(c), static_cast<uint32_t>(c >> 32)};
    ASSERT_EQ(Philox::block(ctr, key), reference_philox(ctr, key));
    ASSERT_EQ(Philox::block(c, a),
              reference_philox(Ctr{static_cast<uint32_t>(a), static_cast<uint32_t>(a >> 32), 0, 0}, key));
  }
}

// word k of stream `seed`
uint32_t word(uint64_t seed, uint64_t k) { return Philox::block(seed, k / 4)[k % 4]; }
uint64_t word64(uint64_t seed, uint64_t k) { return (uint64_t{word(seed, k + 1)} << 32) | word(seed, k); }

TEST(CoreRng, DocumentedMapping) {
  const uint64_t seed = 0x0123456789abcdefull, start = 4 * 1234567;
  const int64_t n = 1003;
  std::vector<float> uf(n), nf(n);
  std::vector<double> ud(n), nd(n);
  std::vector<int64_t> ri(n);
  uoe::fill_uniform(uf.data(), n, seed, start, -2.0f, 3.0f);
  uoe::fill_uniform(ud.data(), n, seed, start, -2.0, 3.0);
  uoe::fill_normal(nf.data(), n, seed, start, 1.0f, 2.0f);
  uoe::fill_normal(nd.data(), n, seed, start, 1.0, 2.0);
  uoe::fill_randint(ri.data(), n, seed, start, -1000, 12345);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t k = start + static_cast<uint64_t>(i);
    const double xf = static_cast<double>(word(seed, k) >> 8) * 0x1p-24;
    ASSERT_EQ(uf[i], static_cast<float>(-2.0 + xf * 5.0)) << i;
    const uint64_t k2 = start + 2 * static_cast<uint64_t>(i);
    const double xd = static_cast<double>(word64(seed, k2) >> 11) * 0x1p-53;
    ASSERT_EQ(ud[i], std::fma(xd, 5.0, -2.0)) << i;
    const auto prod = static_cast<unsigned __int128>(word64(seed, k2)) * 13345u;
    ASSERT_EQ(ri[i], -1000 + static_cast<int64_t>(prod >> 64)) << i;
    // normal float: Box-Muller on the word pair (k & ~1, k | 1)
    const uint64_t p = k & ~uint64_t{1};
    const double u1 = (static_cast<double>(word(seed, p)) + 1.0) * 0x1p-32;
    const double u2 = static_cast<double>(word(seed, p + 1)) * 0x1p-32;
    const double r = std::sqrt(-2.0 * std::log(u1)), th = 2 * kPi * u2;
    const double zf = (k & 1) ? r * std::sin(th) : r * std::cos(th);
    ASSERT_NEAR(nf[i], 1.0 + 2.0 * zf, 1e-5 * (1.0 + std::fabs(zf))) << i;
    // normal double: block (start + 2i) / 4, u1 from its words 0,1, u2 from words 2,3
    const uint64_t b = (start / 4) + static_cast<uint64_t>(i / 2);
    const double d1 = static_cast<double>((word64(seed, 4 * b) >> 11) + 1) * 0x1p-53;
    const double d2 = static_cast<double>(word64(seed, 4 * b + 2) >> 11) * 0x1p-53;
    const double rd = std::sqrt(-2.0 * std::log(d1)), td = 2 * kPi * d2;
    const double zd = (i & 1) ? rd * std::sin(td) : rd * std::cos(td);
    ASSERT_NEAR(nd[i], 1.0 + 2.0 * zd, 1e-12 * (1.0 + std::fabs(zd))) << i;
  }
}

template <class T>
void moments(const std::vector<T>& v, double& mean, double& var) {
  long double s = 0, s2 = 0;
  for (T x : v) s += x;
  mean = static_cast<double>(s / v.size());
  for (T x : v) s2 += (x - mean) * (x - mean);
  var = static_cast<double>(s2 / (v.size() - 1));
}

TEST(CoreRng, UniformStatistics) {
  const int64_t n = 1'000'000;
  std::vector<float> f(n);
  std::vector<double> d(n);
  uoe::fill_uniform(f.data(), n, 42, 0, 0.0f, 1.0f);
  uoe::fill_uniform(d.data(), n, 43, 0, -2.0, 5.0);
  double m, v;
  moments(f, m, v);
  // sd(mean) = 0.29e-3, sd(var) = 0.75e-4: allow ~5 sigma
  EXPECT_NEAR(m, 0.5, 1.5e-3);
  EXPECT_NEAR(v, 1.0 / 12, 4e-4);
  for (float x : f) ASSERT_TRUE(x >= 0.0f && x < 1.0f);
  moments(d, m, v);
  EXPECT_NEAR(m, 1.5, 7 * 1.5e-3);
  EXPECT_NEAR(v, 49.0 / 12, 49 * 4e-4);
  for (double x : d) ASSERT_TRUE(x >= -2.0 && x < 5.0);
  // chi-square over 100 equal bins (99 dof: mean 99, sd 14)
  std::vector<double> count(100, 0.0);
  for (float x : f) count[static_cast<int>(x * 100)] += 1;
  double chi2 = 0;
  for (double c : count) chi2 += (c - n / 100.0) * (c - n / 100.0) / (n / 100.0);
  EXPECT_LT(chi2, 99 + 6 * 14.1);
}

TEST(CoreRng, UniformNeverReturnsHigh) {
  const float lo = 1.0f, hi = std::nextafter(1.0f, 2.0f);  // any x >= 0.5 would round to hi
  std::vector<float> f(10000);
  uoe::fill_uniform(f.data(), 10000, 5, 0, lo, hi);
  for (float x : f) ASSERT_EQ(x, lo);
  uoe::fill_uniform(f.data(), 10000, 5, 0, 3.0f, 3.0f);  // empty range -> low
  for (float x : f) ASSERT_EQ(x, 3.0f);
  std::vector<double> d(10000);
  uoe::fill_uniform(d.data(), 10000, 5, 0, 1.0, std::nextafter(1.0, 2.0));
  for (double x : d) ASSERT_EQ(x, 1.0);
  EXPECT_THROW(uoe::fill_uniform(f.data(), 1, 0, 0, 1.0f, 0.0f), std::invalid_argument);
  EXPECT_THROW(uoe::fill_uniform(f.data(), 1, 0, 0, -3e38f, 3e38f), std::invalid_argument);
}

TEST(CoreRng, NormalStatistics) {
  const int64_t n = 1'000'000;
  for (int dbl = 0; dbl < 2; ++dbl) {
    std::vector<double> z(n);
    if (dbl) {
      uoe::fill_normal(z.data(), n, 7, 0, 2.0, 3.0);
    } else {
      std::vector<float> f(n);
      uoe::fill_normal(f.data(), n, 7, 0, 2.0f, 3.0f);
      for (int64_t i = 0; i < n; ++i) z[i] = f[i];
    }
    for (double& x : z) x = (x - 2.0) / 3.0;
    double m, v;
    moments(z, m, v);
    EXPECT_NEAR(m, 0.0, 5e-3) << dbl;  // sd(mean) = 1e-3
    EXPECT_NEAR(v, 1.0, 7e-3) << dbl;  // sd(var) = 1.4e-3
    double s3 = 0, s4 = 0, tail = 0;
    for (double x : z) {
      s3 += x * x * x;
      s4 += x * x * x * x;
      tail += std::fabs(x) > 3.0;
      ASSERT_TRUE(std::isfinite(x));
    }
    EXPECT_NEAR(s3 / n, 0.0, 0.015) << dbl;         // sd 0.0024
    EXPECT_NEAR(s4 / n, 3.0, 0.06) << dbl;          // sd 0.0098
    EXPECT_NEAR(tail / n, 0.0026998, 3e-4) << dbl;  // sd 5.2e-5
  }
  std::vector<float> f(100);
  uoe::fill_normal(f.data(), 100, 7, 0, 1.5f, 0.0f);
  for (float x : f) ASSERT_EQ(x, 1.5f);
}

TEST(CoreRng, RandintUniformChiSquare) {
  const int64_t n = 1'000'000;
  std::vector<int64_t> v(n);
  uoe::fill_randint(v.data(), n, 11, 0, -3, 7);
  std::vector<double> count(10, 0.0);
  for (int64_t x : v) {
    ASSERT_TRUE(x >= -3 && x < 7) << x;
    count[x + 3] += 1;
  }
  double chi2 = 0;
  for (double c : count) chi2 += (c - n / 10.0) * (c - n / 10.0) / (n / 10.0);
  EXPECT_LT(chi2, 40.0);  // 9 dof: p(chi2 > 40) ~ 7e-6
  for (double c : count) EXPECT_GT(c, 0);

  // a wider range: 1000 bins, 999 dof (mean 999, sd 44.7)
  uoe::fill_randint(v.data(), n, 12, 0, 1000, 2000);
  std::vector<double> c2(1000, 0.0);
  for (int64_t x : v) {
    ASSERT_TRUE(x >= 1000 && x < 2000) << x;
    c2[x - 1000] += 1;
  }
  chi2 = 0;
  for (double c : c2) chi2 += (c - n / 1000.0) * (c - n / 1000.0) / (n / 1000.0);
  EXPECT_LT(chi2, 999 + 6 * 44.7);

  // huge ranges: bounds respected, low bits still uniform
  uoe::fill_randint(v.data(), n, 13, 0, 0, int64_t{1} << 40);
  std::vector<double> c3(16, 0.0);
  for (int64_t x : v) {
    ASSERT_TRUE(x >= 0 && x < (int64_t{1} << 40));
    c3[x & 15] += 1;
  }
  chi2 = 0;
  for (double c : c3) chi2 += (c - n / 16.0) * (c - n / 16.0) / (n / 16.0);
  EXPECT_LT(chi2, 50.0);  // 15 dof
  const int64_t lo = std::numeric_limits<int64_t>::min(), hi = std::numeric_limits<int64_t>::max();
  uoe::fill_randint(v.data(), 1000, 14, 0, lo, hi);
  int64_t negatives = 0;
  for (int i = 0; i < 1000; ++i) {
    ASSERT_LT(v[i], hi);
    negatives += v[i] < 0;
  }
  EXPECT_GT(negatives, 400);
  EXPECT_LT(negatives, 600);
  uoe::fill_randint(v.data(), 100, 15, 0, 5, 6);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(v[i], 5);
  EXPECT_THROW(uoe::fill_randint(v.data(), 1, 0, 0, 5, 5), std::invalid_argument);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Runs every fill type into fresh vectors of n elements.
struct AllFills {
  std::vector<float> uf, nf;
  std::vector<double> ud, nd;
  std::vector<int64_t> ri;
  explicit AllFills(int64_t n, uint64_t seed, uint64_t start)
      : uf(n), nf(n), ud(n), nd(n), ri(n) {
    uoe::fill_uniform(uf.data(), n, seed, start, -1.0f, 1.0f);
    uoe::fill_normal(nf.data(), n, seed, start, 0.0f, 1.0f);
    uoe::fill_uniform(ud.data(), n, seed, start, -1.0, 1.0);
    uoe::fill_normal(nd.data(), n, seed, start, 0.0, 1.0);
    uoe::fill_randint(ri.data(), n, seed, start, -50, 1000003);
  }
  bool operator==(const AllFills& o) const {
    return same_bits(uf, o.uf) && same_bits(nf, o.nf) && same_bits(ud, o.ud) &&
           same_bits(nd, o.nd) && same_bits(ri, o.ri);
  }
};

TEST(CoreRng, ThreadCountIndependent) {
  const int64_t n = (int64_t{1} << 20) + 7;  // well above the parallel threshold, ragged tail
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const AllFills ref(n, 2024, 4 * 77);
  for (int t : {2, 3, 8}) {
    omp_set_num_threads(t);
    EXPECT_TRUE(AllFills(n, 2024, 4 * 77) == ref) << t << " threads";
  }
  // from inside a parallel region (runs serially there), too
  AllFills* inner = nullptr;
#pragma omp parallel num_threads(2)
  {
#pragma omp single
    inner = new AllFills(n, 2024, 4 * 77);
  }
  EXPECT_TRUE(*inner == ref);
  delete inner;
  omp_set_num_threads(saved);
}

TEST(CoreRng, SplitFillsMatchOneFill) {
  const uint64_t seed = 31337, start = 400;
  const int64_t n = 1001;
  const AllFills whole(n, seed, start);
  for (int64_t k : {0, 4, 8, 400, 1000}) {
    SCOPED_TRACE(k);
    std::vector<float> uf(n), nf(n);
    std::vector<double> ud(n), nd(n);
    std::vector<int64_t> ri(n);
    const uint64_t k1 = static_cast<uint64_t>(k) * uoe::kRngWordsPerFloat;
    const uint64_t k2 = static_cast<uint64_t>(k) * uoe::kRngWordsPerDouble;
    uoe::fill_uniform(uf.data(), k, seed, start, -1.0f, 1.0f);
    uoe::fill_uniform(uf.data() + k, n - k, seed, start + k1, -1.0f, 1.0f);
    uoe::fill_normal(nf.data(), k, seed, start, 0.0f, 1.0f);
    uoe::fill_normal(nf.data() + k, n - k, seed, start + k1, 0.0f, 1.0f);
    uoe::fill_uniform(ud.data(), k, seed, start, -1.0, 1.0);
    uoe::fill_uniform(ud.data() + k, n - k, seed, start + k2, -1.0, 1.0);
    uoe::fill_normal(nd.data(), k, seed, start, 0.0, 1.0);
    uoe::fill_normal(nd.data() + k, n - k, seed, start + k2, 0.0, 1.0);
    uoe::fill_randint(ri.data(), k, seed, start, -50, 1000003);
    uoe::fill_randint(ri.data() + k, n - k, seed, start + static_cast<uint64_t>(k) * uoe::kRngWordsPerInt64, -50, 1000003);
    EXPECT_TRUE(same_bits(uf, whole.uf));
    EXPECT_TRUE(same_bits(nf, whole.nf));
    EXPECT_TRUE(same_bits(ud, whole.ud));
    EXPECT_TRUE(same_bits(nd, whole.nd));
    EXPECT_TRUE(same_bits(ri, whole.ri));
  }
  // prefixes agree whatever n is
  const AllFills shorter(13, seed, start);
  for (int64_t i = 0; i < 13; ++i) {
    ASSERT_EQ(shorter.uf[i], whole.uf[i]);
    ASSERT_EQ(shorter.nf[i], whole.nf[i]);
    ASSERT_EQ(shorter.nd[i], whole.nd[i]);
  }
}

TEST(CoreRng, SeedsAndOffsetsGiveDifferentStreams) {
  const AllFills a(64, 1, 0), b(64, 2, 0), c(64, 1, 64 * 2);
  int same_ab = 0, same_ac = 0;
  for (int i = 0; i < 64; ++i) {
    same_ab += a.ri[i] == b.ri[i];
    same_ac += a.ri[i] == c.ri[i];
  }
  EXPECT_LT(same_ab, 3);
  EXPECT_LT(same_ac, 3);
  // seeds that differ only in the high 32 bits are different keys
  EXPECT_NE(Philox::block(uint64_t{1}, 0), Philox::block((uint64_t{1} << 32) | 1, 0));
}

TEST(CoreRng, StartMustBeBlockAligned) {
  std::vector<float> f(8);
  std::vector<double> d(8);
  std::vector<int64_t> r(8);
  for (uint64_t s : {1u, 2u, 3u, 6u}) {
    EXPECT_THROW(uoe::fill_uniform(f.data(), 8, 0, s, 0.0f, 1.0f), std::invalid_argument);
    EXPECT_THROW(uoe::fill_normal(d.data(), 8, 0, s, 0.0, 1.0), std::invalid_argument);
    EXPECT_THROW(uoe::fill_randint(r.data(), 8, 0, s, 0, 9), std::invalid_argument);
  }
  EXPECT_NO_THROW(uoe::fill_uniform(f.data(), 0, 0, 8, 0.0f, 1.0f));
}

TEST(CoreGenerator, ReserveAdvancesOffset) {
  uoe::Generator g(5);
  EXPECT_EQ(g.seed(), 5u);
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_EQ(g.reserve(1), 0u);
  EXPECT_EQ(g.offset(), 4u);
  EXPECT_EQ(g.reserve(8), 4u);
  EXPECT_EQ(g.offset(), 12u);
  EXPECT_EQ(g.reserve(0), 12u);
  EXPECT_EQ(g.offset(), 12u);
  EXPECT_EQ(g.reserve(5), 12u);
  EXPECT_EQ(g.offset(), 20u);
  g.set_state(9, 6);  // unaligned offset: next start is rounded up
  EXPECT_EQ(g.seed(), 9u);
  EXPECT_EQ(g.offset(), 6u);
  EXPECT_EQ(g.reserve(3), 8u);
  EXPECT_EQ(g.offset(), 12u);
  uoe::Generator copy = g;
  EXPECT_EQ(copy.reserve(4), 12u);
  EXPECT_EQ(g.offset(), 12u);  // copies are independent
  uoe::Generator other;
  EXPECT_EQ(other.seed(), 0u);
  other = copy;
  EXPECT_EQ(other.offset(), 16u);
  EXPECT_EQ(other.seed(), 9u);

  // Drawing through a generator == drawing at explicit offsets.
  uoe::Generator h(77);
  std::vector<float> a(10), b(7), ref(10 + 12);
  uoe::fill_uniform(a.data(), 10, h.seed(), h.reserve(10 * uoe::kRngWordsPerFloat), 0.0f, 1.0f);
  uoe::fill_uniform(b.data(), 7, h.seed(), h.reserve(7 * uoe::kRngWordsPerFloat), 0.0f, 1.0f);
  uoe::fill_uniform(ref.data(), 22, 77, 0, 0.0f, 1.0f);
  for (int i = 0; i < 10; ++i) EXPECT_EQ(a[i], ref[i]);
  for (int i = 0; i < 7; ++i) EXPECT_EQ(b[i], ref[12 + i]);  // second draw starts at offset 12
}

TEST(CoreGenerator, ConcurrentReservesAreDisjoint) {
  uoe::Generator g(1);
  std::vector<uint64_t> starts(4000);
#pragma omp parallel for num_threads(4)
  for (int i = 0; i < 4000; ++i) starts[i] = g.reserve(3);
  std::sort(starts.begin(), starts.end());
  for (int i = 0; i < 4000; ++i) ASSERT_EQ(starts[i], 4u * i);
  EXPECT_EQ(g.offset(), 16000u);
}

TEST(CoreGenerator, DefaultGeneratorAndManualSeed) {
  uoe::Generator& g = uoe::default_generator();
  EXPECT_EQ(&g, &uoe::default_generator());
  g.reserve(100);
  uoe::manual_seed(1234);
  EXPECT_EQ(g.seed(), 1234u);
  EXPECT_EQ(g.offset(), 0u);
  EXPECT_EQ(g.reserve(2), 0u);
  EXPECT_EQ(g.offset(), 4u);
  uoe::manual_seed(0);
  EXPECT_EQ(g.seed(), 0u);
  EXPECT_EQ(g.offset(), 0u);
}

}  // namespace
