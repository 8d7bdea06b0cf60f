// The CUDA copy's bfloat16 and float16 conversions (cuda/half_convert.cuh), written with device intrinsics, on the
// CPU through the stand-in runtime of tests/cuda_emu/include, bit for bit against core/half.h's host conversions:
// every 16-bit pattern to float, and to 16 bits from floats around every 16-bit value's rounding boundaries (ties,
// one ulp either side), subnormals, overflow, infinities and NaN, plus a sweep of the whole float range.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "cuda/half_convert.cuh"

namespace uoe::cuda {
namespace {

uint32_t float_bits(float f) { return std::bit_cast<uint32_t>(f); }

// Floats that stress a 16-bit format: each 16-bit value's neighbours (given as floats by `to_float`) and the
// midpoints between consecutive values, with one float ulp either side; then every 65,537th float bit pattern.
template <class ToFloat>
std::vector<float> boundary_floats(ToFloat to_float) {
  std::vector<float> v;
  for (uint32_t h = 0; h < 0xffffu; ++h) {
    const float a = to_float(uint16_t(h)), b = to_float(uint16_t(h + 1));
    if (!std::isfinite(a) || !std::isfinite(b)) continue;
    const float mid = float((double(a) + double(b)) / 2);
    for (const float x : {a, mid, std::nextafter(mid, -INFINITY), std::nextafter(mid, INFINITY)}) v.push_back(x);
  }
  for (uint64_t u = 0; u <= 0xffffffffu; u += 65537) v.push_back(std::bit_cast<float>(uint32_t(u)));
  for (const float x : {0.0f, -0.0f, INFINITY, -INFINITY, std::numeric_limits<float>::max(),
                        std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::quiet_NaN(),
                        std::bit_cast<float>(0x7f800001u), std::bit_cast<float>(0xffc12345u)})
    v.push_back(x);
  return v;
}

TEST(CudaHalfConvertEmulated, EveryBfloat16ToFloatIsTheHosts) {
  for (uint32_t h = 0; h <= 0xffffu; ++h)
    ASSERT_EQ(float_bits(bf16_bits_to_float(uint16_t(h))), float_bits(uoe::bf16_bits_to_float(uint16_t(h))))
        << "bits 0x" << std::hex << h;
}

TEST(CudaHalfConvertEmulated, EveryFloat16ToFloatIsTheHosts) {
  for (uint32_t h = 0; h <= 0xffffu; ++h)
    ASSERT_EQ(float_bits(f16_bits_to_float(uint16_t(h))), float_bits(uoe::f16_bits_to_float(uint16_t(h))))
        << "bits 0x" << std::hex << h;
}

TEST(CudaHalfConvertEmulated, FloatToBfloat16RoundsAsTheHost) {
  for (const float x : boundary_floats([](uint16_t h) { return uoe::bf16_bits_to_float(h); }))
    ASSERT_EQ(float_to_bf16_bits(x), uoe::float_to_bf16_bits(x)) << "float bits 0x" << std::hex << float_bits(x);
}

TEST(CudaHalfConvertEmulated, FloatToFloat16RoundsAsTheHost) {
  for (const float x : boundary_floats([](uint16_t h) { return uoe::f16_bits_to_float(h); }))
    ASSERT_EQ(float_to_f16_bits(x), uoe::float_to_f16_bits(x)) << "float bits 0x" << std::hex << float_bits(x);
}

// The copy's cast between element types: halves go through float, as cpu::copy_kernels' cast_value.
TEST(CudaHalfConvertEmulated, CastsGoThroughFloat) {
  EXPECT_EQ((cast_value<DevBf16, DevF16>(DevF16{uoe::float_to_f16_bits(1.5f)}).bits), uoe::float_to_bf16_bits(1.5f));
  EXPECT_EQ((cast_value<DevF16, double>(0.1).bits), uoe::float_to_f16_bits(float(0.1)));
  EXPECT_EQ((cast_value<int32_t, DevBf16>(DevBf16{uoe::float_to_bf16_bits(-7.75f)})), -7);
  EXPECT_EQ((cast_value<int64_t, int64_t>(int64_t(1) << 40)), int64_t(1) << 40);
}

}  // namespace
}  // namespace uoe::cuda
