// Tests for core/half.h: exhaustive round trips, RNE against independent references, bulk == scalar.
#include "core/half.h"

#include <gtest/gtest.h>

#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace {

using uoe::BFloat16;
using uoe::Float16;

uint32_t fbits(float f) { return std::bit_cast<uint32_t>(f); }
float bitsf(uint32_t u) { return std::bit_cast<float>(u); }

// ---- Independent reference: a binary16-like format described by (exponent bits, mantissa bits),
// decoded into double, with rounding done by searching the code table. ----
struct Format {
  int ebits, mbits;
  int bias() const { return (1 << (ebits - 1)) - 1; }
  uint32_t inf_code() const { return ((1u << ebits) - 1u) << mbits; }
  // Value of a positive code, treating the all-ones exponent as an ordinary exponent (so the inf
  // code decodes to 2^(emax+1), the threshold used for IEEE overflow rounding).
  double value(uint32_t code) const {
    const uint32_t e = code >> mbits, m = code & ((1u << mbits) - 1u);
    if (e == 0) return std::ldexp(static_cast<double>(m), 1 - bias() - mbits);
    return std::ldexp(static_cast<double>((1u << mbits) + m), static_cast<int>(e) - bias() - mbits);
  }
  // Round-to-nearest-even encode of a non-NaN float, by search; returns the full code with sign.
  uint16_t encode(float f) const {
    const uint32_t sign = std::signbit(f) ? (1u << (ebits + mbits)) : 0u;
    const double x = std::fabs(static_cast<double>(f));
    uint32_t lo = 0, hi = inf_code();  // largest code with value(code) <= x, in [lo, hi]
    while (lo < hi) {
      const uint32_t mid = lo + (hi - lo + 1) / 2;
      if (value(mid) <= x) lo = mid; else hi = mid - 1;
    }
    uint32_t c = lo;
    if (c < inf_code()) {
      const double twice = 2.0 * x, sum = value(c) + value(c + 1);  // both exact in double
      if (twice > sum || (twice == sum && (c & 1u))) ++c;
    }
    return static_cast<uint16_t>(sign | c);
  }
  bool is_nan_code(uint32_t code) const {
    const uint32_t mag = code & ((1u << (ebits + mbits)) - 1u);
    return mag > inf_code();
  }
};
constexpr Format kF16{5, 10};
constexpr Format kBF16{8, 7};

uint16_t f16_via_Float16(float f) {
  const _Float16 h = static_cast<_Float16>(f);  // libgcc / F16C conversion, used only as a reference
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
float f16_to_float_via_Float16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}

// Checks our f32->f16 / f32->bf16 against the references for one float.
void check_encode(float f) {
  const uint16_t got16 = Float16(f).bits, gotb = BFloat16(f).bits;
  if (std::isnan(f)) {
    ASSERT_TRUE(kF16.is_nan_code(got16)) << std::hex << fbits(f);
    ASSERT_TRUE(got16 & 0x0200u) << "f16 NaN must be quiet";
    ASSERT_TRUE(kBF16.is_nan_code(gotb)) << std::hex << fbits(f);
    ASSERT_TRUE(gotb & 0x0040u) << "bf16 NaN must be quiet";
    ASSERT_EQ(got16 >> 15, fbits(f) >> 31);
    ASSERT_EQ(gotb >> 15, fbits(f) >> 31);
    return;
  }
  ASSERT_EQ(got16, kF16.encode(f)) << "f16, float bits 0x" << std::hex << fbits(f);
  ASSERT_EQ(got16, f16_via_Float16(f)) << "f16 vs _Float16, float bits 0x" << std::hex << fbits(f);
  ASSERT_EQ(gotb, kBF16.encode(f)) << "bf16, float bits 0x" << std::hex << fbits(f);
}

TEST(CoreHalf, TypeProperties) {
  static_assert(sizeof(BFloat16) == 2 && sizeof(Float16) == 2);
  static_assert(std::is_trivially_copyable_v<BFloat16> && std::is_trivially_copyable_v<Float16>);
  // constexpr usable
  static_assert(Float16(1.0f).bits == 0x3c00 && BFloat16(1.0f).bits == 0x3f80);
  static_assert(static_cast<float>(Float16::from_bits(0x0001)) == 0x1p-24f);
  const Float16 a(2.5f);
  const float back = a;  // implicit conversion
  EXPECT_EQ(back, 2.5f);
  EXPECT_EQ(BFloat16(-3.0f).to_float(), -3.0f);
  EXPECT_EQ(Float16(1.0f) + Float16(2.0f), 3.0f);
}

TEST(CoreHalf, ExhaustiveF16RoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto h = static_cast<uint16_t>(c);
    const float f = Float16::from_bits(h);
    if (kF16.is_nan_code(h)) {
      ASSERT_TRUE(std::isnan(f)) << c;
      const uint16_t back = Float16(f).bits;
      ASSERT_TRUE(kF16.is_nan_code(back)) << c;
      ASSERT_EQ(back, h | 0x0200u) << c;  // payload and sign kept, quiet bit set
      continue;
    }
    // decode agrees with the double reference (value and sign) and with _Float16
    const double ref = (h & 0x8000u ? -1.0 : 1.0) *
                       ((h & 0x7fffu) == 0x7c00u ? std::numeric_limits<double>::infinity()
                                                 : kF16.value(h & 0x7fffu));
    ASSERT_EQ(static_cast<double>(f), ref) << c;
    ASSERT_EQ(std::signbit(f), (h & 0x8000u) != 0) << c;
    ASSERT_EQ(fbits(f), fbits(f16_to_float_via_Float16(h))) << c;
    ASSERT_EQ(Float16(f).bits, h) << c;
  }
}

TEST(CoreHalf, ExhaustiveBF16RoundTrip) {
  for (uint32_t c = 0; c < 65536; ++c) {
    const auto h = static_cast<uint16_t>(c);
    const float f = BFloat16::from_bits(h);
    ASSERT_EQ(fbits(f), c << 16) << c;
    const uint16_t back = BFloat16(f).bits;
    if (kBF16.is_nan_code(h)) {
      ASSERT_TRUE(std::isnan(f)) << c;
      ASSERT_EQ(back, h | 0x0040u) << c;
    } else {
      ASSERT_EQ(back, h) << c;
    }
  }
}

TEST(CoreHalf, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(Float16(inf).bits, 0x7c00);
  EXPECT_EQ(Float16(-inf).bits, 0xfc00);
  EXPECT_EQ(BFloat16(inf).bits, 0x7f80);
  EXPECT_EQ(BFloat16(-inf).bits, 0xff80);
  EXPECT_EQ(Float16(-0.0f).bits, 0x8000);
  EXPECT_EQ(BFloat16(-0.0f).bits, 0x8000);
  EXPECT_EQ(Float16(0.0f).bits, 0x0000);
  EXPECT_EQ(Float16(65504.0f).bits, 0x7bff);
  EXPECT_EQ(Float16(65519.996f).bits, 0x7bff);
  EXPECT_EQ(Float16(65520.0f).bits, 0x7c00);  // tie at the overflow threshold -> inf
  EXPECT_EQ(Float16(1e10f).bits, 0x7c00);
  EXPECT_EQ(Float16(-1e10f).bits, 0xfc00);
  EXPECT_EQ(BFloat16(std::numeric_limits<float>::max()).bits, 0x7f80);  // rounds up to inf
  EXPECT_EQ(BFloat16(bitsf(0x7f7f7fffu)).bits, 0x7f7f);
  EXPECT_EQ(Float16(0x1p-24f).bits, 0x0001);
  EXPECT_EQ(Float16(0x1p-25f).bits, 0x0000);  // tie -> even (0)
  EXPECT_EQ(Float16(-0x1p-25f).bits, 0x8000);
  EXPECT_EQ(Float16(std::nextafter(0x1p-25f, 1.0f)).bits, 0x0001);
  EXPECT_EQ(Float16(0x3p-25f).bits, 0x0002);  // 1.5 ulp -> 2
  EXPECT_EQ(Float16(0x1p-14f).bits, 0x0400);
  EXPECT_EQ(Float16(std::nextafter(0x1p-14f, 0.0f)).bits, 0x0400);  // rounds up into normal
  EXPECT_EQ(Float16(0x1p-149f).bits, 0x0000);                       // float subnormal
  EXPECT_EQ(Float16(-std::numeric_limits<float>::min()).bits, 0x8000);
  EXPECT_EQ(BFloat16(bitsf(0x00010000u)).bits, 0x0001);             // bf16 keeps float subnormals
  EXPECT_EQ(BFloat16(0x1p-149f).bits, 0x0000);
  EXPECT_EQ(BFloat16(bitsf(0x00008000u)).bits, 0x0000);             // tie -> even
  EXPECT_EQ(BFloat16(bitsf(0x00018000u)).bits, 0x0002);
  EXPECT_EQ(Float16::from_bits(0x03ff).to_float(), 0x3ffp-24f);
  EXPECT_EQ(Float16::from_bits(0x7bff).to_float(), 65504.0f);
  EXPECT_TRUE(std::isinf(Float16::from_bits(0xfc00).to_float()));
  // NaNs, including ones whose payload lives only in the bits that get dropped
  for (uint32_t nb : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fbfffffu, 0x7f802000u}) {
    SCOPED_TRACE(nb);
    check_encode(bitsf(nb));
    EXPECT_TRUE(std::isnan(Float16(bitsf(nb)).to_float()));
    EXPECT_TRUE(std::isnan(BFloat16(bitsf(nb)).to_float()));
  }
}

// Every midpoint between adjacent representable values (and its float neighbours), both signs.
TEST(CoreHalf, AllTiesF16) {
  for (uint32_t c = 0; c < 0x7c00u; ++c) {
    const double mid_d = (kF16.value(c) + kF16.value(c + 1)) / 2;
    const float mid = static_cast<float>(mid_d);
    ASSERT_EQ(static_cast<double>(mid), mid_d);  // exact
    for (float f : {mid, std::nextafter(mid, 0.0f), std::nextafter(mid, 1e30f),
                    static_cast<float>(kF16.value(c))}) {
      check_encode(f);
      check_encode(-f);
    }
    const uint16_t expect_even = static_cast<uint16_t>((c & 1u) ? c + 1 : c);
    ASSERT_EQ(Float16(mid).bits, expect_even) << c;
  }
}

TEST(CoreHalf, AllTiesBF16) {
  for (uint32_t c = 0; c < 0x7f80u; ++c) {
    const uint32_t mid = (c << 16) | 0x8000u;
    for (uint32_t b : {mid, mid - 1, mid + 1, c << 16}) {
      check_encode(bitsf(b));
      check_encode(bitsf(b | 0x80000000u));
    }
    ASSERT_EQ(BFloat16(bitsf(mid)).bits, (c & 1u) ? c + 1 : c) << c;
  }
}

TEST(CoreHalf, RandomFloatsAgainstReferences) {
  std::mt19937_64 rng(12345);
  for (int i = 0; i < 2'000'000; ++i) {
    const uint64_t r = rng();
    const auto u = static_cast<uint32_t>(r);
    check_encode(bitsf(u));  // any pattern
    // concentrate on the f16 range: exponent 96..145 (deep underflow .. overflow)
    const uint32_t e = 96u + static_cast<uint32_t>((r >> 32) % 50u);
    check_encode(bitsf((u & 0x807fffffu) | (e << 23)));
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// ---- bulk == scalar ----

std::vector<float> bulk_inputs() {
  std::vector<float> v;
  std::mt19937 rng(7);
  for (uint32_t c = 0; c < 65536; ++c) {  // all f16 and bf16 values and their neighbours
    const float f16v = Float16::from_bits(static_cast<uint16_t>(c));
    v.push_back(f16v);
    v.push_back(std::nextafter(f16v, 0.0f));
    v.push_back(bitsf((c << 16) | 0x8000u));
    v.push_back(bitsf((c << 16) | 0x7fffu));
  }
  while (v.size() < 1'000'003) {  // > parallel threshold, odd length
    const uint32_t u = rng();
    v.push_back(bitsf(u));
    v.push_back(bitsf((u & 0x807fffffu) | ((100u + u % 45u) << 23)));
  }
  v.resize(1'000'003);
  return v;
}

TEST(CoreHalf, BulkF32ToHalfEqualsScalar) {
  const std::vector<float> in = bulk_inputs();
  const int64_t n = static_cast<int64_t>(in.size());
  std::vector<BFloat16> b(in.size());
  std::vector<Float16> h(in.size());
  uoe::convert_f32_to_bf16(in.data(), b.data(), n);
  uoe::convert_f32_to_f16(in.data(), h.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(b[i].bits, BFloat16(in[i]).bits) << i;
    ASSERT_EQ(h[i].bits, Float16(in[i]).bits) << i;
  }
  // small, unaligned and empty calls
  for (int64_t len : {0, 1, 3, 7, 15, 16, 17, 33, 100}) {
    std::vector<Float16> hs(101, Float16::from_bits(0xabcd));
    std::vector<BFloat16> bs(101, BFloat16::from_bits(0xabcd));
    uoe::convert_f32_to_f16(in.data() + 1, hs.data() + 1, len);
    uoe::convert_f32_to_bf16(in.data() + 1, bs.data() + 1, len);
    for (int64_t i = 0; i < 101; ++i) {
      const bool inside = i >= 1 && i <= len;
      ASSERT_EQ(hs[i].bits, inside ? Float16(in[i]).bits : 0xabcd) << len << " " << i;
      ASSERT_EQ(bs[i].bits, inside ? BFloat16(in[i]).bits : 0xabcd) << len << " " << i;
    }
  }
}

TEST(CoreHalf, BulkHalfToF32EqualsScalar) {
  const int64_t n = 65536 * 5 + 7;  // all patterns, > parallel threshold
  std::vector<Float16> h(n);
  std::vector<BFloat16> b(n);
  for (int64_t i = 0; i < n; ++i) {
    h[i] = Float16::from_bits(static_cast<uint16_t>(i * 40503));
    b[i] = BFloat16::from_bits(static_cast<uint16_t>(i * 40503));
  }
  std::vector<float> fh(n), fb(n);
  uoe::convert_f16_to_f32(h.data(), fh.data(), n);
  uoe::convert_bf16_to_f32(b.data(), fb.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(fbits(fh[i]), fbits(h[i].to_float())) << i;
    ASSERT_EQ(fbits(fb[i]), fbits(b[i].to_float())) << i;
  }
  for (int64_t len : {1, 5, 31}) {  // small tails
    std::vector<float> out(len);
    uoe::convert_f16_to_f32(h.data() + 3, out.data(), len);
    for (int64_t i = 0; i < len; ++i) ASSERT_EQ(fbits(out[i]), fbits(h[i + 3].to_float()));
    uoe::convert_bf16_to_f32(b.data() + 3, out.data(), len);
    for (int64_t i = 0; i < len; ++i) ASSERT_EQ(fbits(out[i]), fbits(b[i + 3].to_float()));
  }
}

// The strided form (rows of a larger matrix into a contiguous block): every element as the scalar conversion, the
// padding between source rows not read into the output.
TEST(CoreHalf, BulkBF16RowsToF32EqualsScalar) {
  std::vector<BFloat16> b(4096);
  for (size_t i = 0; i < b.size(); ++i) b[i] = BFloat16::from_bits(static_cast<uint16_t>(i * 40503 + 11));
  for (const auto& [rows, cols, ld] : {std::array<int64_t, 3>{1, 1, 1}, {3, 14, 17}, {14, 33, 40}, {5, 64, 64}}) {
    std::vector<float> out(size_t(rows * cols), -1.0f);
    uoe::convert_bf16_to_f32_rows(b.data() + 5, ld, rows, cols, out.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        ASSERT_EQ(fbits(out[size_t(r * cols + c)]), fbits(b[size_t(5 + r * ld + c)].to_float()))
            << "rows " << rows << " cols " << cols << " ld " << ld << " at " << r << "," << c;
  }
}

}  // namespace
