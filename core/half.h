// uoe::BFloat16 / uoe::Float16: bit-exact RNE conversions to and from float, plus vectorised bulk converters.
#pragma once

#include <bit>
#include <cstdint>
#include <type_traits>

namespace uoe {

// ---------------------------------------------------------------------------------------------
// Scalar bit-level conversions (branch-free, constexpr, independent of the FP environment:
// integer bit arithmetic plus, for f16 subnormals, one exact float multiply).
//
// float -> bf16/f16: round to nearest, ties to even. Overflow rounds to +-inf, NaN stays NaN
// (the quiet bit is set, the top payload bits and the sign are kept), -0 stays -0, values below
// half the smallest f16 subnormal round to +-0, f16 subnormals are produced exactly.
// bf16/f16 -> float: exact (every bf16/f16 value is a float); NaN payloads are kept bit-for-bit.
// ---------------------------------------------------------------------------------------------

constexpr uint16_t float_to_bf16_bits(float f) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  // RNE on the low 16 bits; a carry into the exponent is the correct rounding (incl. to inf).
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

constexpr float bf16_bits_to_float(uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<uint32_t>(h) << 16);
}

constexpr uint16_t float_to_f16_bits(float f) noexcept {
  const uint32_t u = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;  // |f|

  // NaN: quiet bit set, top 9 payload bits kept.
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);

  // Normal f16 range (|f| >= 2^-14): rebias the exponent (127 -> 15) and RNE away 13 bits.
  // Anything that rounds past 65504 (including inf) lands at or above 0x7c00 and clamps to inf.
  const uint32_t rebiased = a - (112u << 23);  // only used when a >= 0x38800000, no wrap there
  uint32_t normal = (rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13;
  normal = normal < 0x7c00u ? normal : 0x7c00u;

  // Subnormal f16 range (|f| < 2^-14, float exponent e <= 112): result = RNE(|f| * 2^24)
  // = RNE(m * 2^(e-126)), m = significand with the implicit bit, i.e. m shifted right by 126 - e.
  // e is clamped at 113 (larger e take another path) and the shift at 31 (such tiny inputs, and
  // float subnormals, give 0), keeping every shift count in [13, 31].
  const uint32_t e = (a >> 23) < 113u ? (a >> 23) : 113u;
  const uint32_t m = (a & 0x007fffffu) | 0x00800000u;
  uint32_t shift = 126u - e;
  shift = shift < 31u ? shift : 31u;
  // RNE right shift: add (half - 1) plus the lowest kept bit, then truncate.
  const uint32_t sub = (m + ((1u << (shift - 1u)) - 1u) + ((m >> shift) & 1u)) >> shift;

  const uint32_t mag = a > 0x7f800000u ? nan : (a < 0x38800000u ? sub : normal);
  return static_cast<uint16_t>(sign | mag);
}

constexpr float f16_bits_to_float(uint16_t h) noexcept {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t a = static_cast<uint32_t>(h) & 0x7fffu;
  // Normal: rebias the exponent 15 -> 127. Inf/NaN (exponent 31): rebias by a further 112 so the
  // exponent becomes 255; the payload is kept.
  const uint32_t normal = (a << 13) + (112u << 23) + (a >= 0x7c00u ? (112u << 23) : 0u);
  // Subnormal (exponent 0): m * 2^-24, computed exactly in float (m < 2^10; the product is 0 or
  // a normal float, so neither rounding mode nor FTZ/DAZ can change it).
  const uint32_t sub = std::bit_cast<uint32_t>(static_cast<float>(static_cast<int32_t>(a)) * 0x1p-24f);
  // Mask select (not ?:) so the float multiply stays unconditional and the loop vectorises.
  const uint32_t sub_mask = 0u - static_cast<uint32_t>(a < 0x0400u);
  const uint32_t mag = (sub & sub_mask) | (normal & ~sub_mask);
  return std::bit_cast<float>(sign | mag);
}

// ---------------------------------------------------------------------------------------------
// Storage types. Trivially copyable, standard layout, sizeof == 2; `bits` is the raw IEEE /
// bfloat16 encoding. Arithmetic goes through the implicit conversion to float.
// ---------------------------------------------------------------------------------------------

struct BFloat16 {
  uint16_t bits;

  BFloat16() = default;  // uninitialised, like float (keeps the type trivial)
  constexpr explicit BFloat16(float f) noexcept : bits(float_to_bf16_bits(f)) {}
  constexpr operator float() const noexcept { return bf16_bits_to_float(bits); }
  constexpr float to_float() const noexcept { return bf16_bits_to_float(bits); }
  static constexpr BFloat16 from_bits(uint16_t b) noexcept {
    BFloat16 r{};
    r.bits = b;
    return r;
  }
};

struct Float16 {
  uint16_t bits;

  Float16() = default;
  constexpr explicit Float16(float f) noexcept : bits(float_to_f16_bits(f)) {}
  constexpr operator float() const noexcept { return f16_bits_to_float(bits); }
  constexpr float to_float() const noexcept { return f16_bits_to_float(bits); }
  static constexpr Float16 from_bits(uint16_t b) noexcept {
    Float16 r{};
    r.bits = b;
    return r;
  }
};

static_assert(sizeof(BFloat16) == 2 && alignof(BFloat16) == 2);
static_assert(sizeof(Float16) == 2 && alignof(Float16) == 2);
static_assert(std::is_trivially_copyable_v<BFloat16> && std::is_standard_layout_v<BFloat16>);
static_assert(std::is_trivially_copyable_v<Float16> && std::is_standard_layout_v<Float16>);
static_assert(std::is_trivial_v<BFloat16> && std::is_trivial_v<Float16>);

// ---------------------------------------------------------------------------------------------
// Bulk conversions: results are bit-identical to the scalar functions above. Vectorised
// (AVX-512 / AVX2 / SSE2 chosen at run time) and, for large n outside an OpenMP parallel
// region, split over OpenMP threads. n <= 0 is a no-op. Input and output must not overlap.
// ---------------------------------------------------------------------------------------------

void convert_f32_to_bf16(const float* in, BFloat16* out, int64_t n);
void convert_bf16_to_f32(const BFloat16* in, float* out, int64_t n);
void convert_f32_to_f16(const float* in, Float16* out, int64_t n);
void convert_f16_to_f32(const Float16* in, float* out, int64_t n);
// in[rows, cols] (row stride ld) into a contiguous out[rows, cols], on the calling thread (small blocks, e.g. a GEMM
// panel inside a parallel region).
void convert_bf16_to_f32_rows(const BFloat16* in, int64_t ld, int64_t rows, int64_t cols, float* out);

}  // namespace uoe
