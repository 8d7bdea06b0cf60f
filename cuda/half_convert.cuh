// The CUDA copy's element conversions (used by cuda/copy_kernels.cu; checked bit for bit against core/half.h by
// uoe_cuda_emu_tests): bfloat16 and float16 written for the device as core/half.h converts them on the host (round
// to nearest even, NaN kept quiet), and the cast between any two element types.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/half.h"

namespace uoe::cuda {
namespace {

// Device stand-ins for uoe::BFloat16 / uoe::Float16 (same 16-bit layout; the host structs' constexpr conversions
// are not callable on the device).
struct DevBf16 {
  uint16_t bits;
};
struct DevF16 {
  uint16_t bits;
};

template <typename T> struct DeviceType { using type = T; };
template <> struct DeviceType<BFloat16> { using type = DevBf16; };
template <> struct DeviceType<Float16> { using type = DevF16; };
template <typename T> using device_t = typename DeviceType<T>::type;

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, DevBf16> || std::is_same_v<T, DevF16>;

// ---- core/half.h, on the device --------------------------------------------------------------
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ uint16_t float_to_f16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  const uint32_t rebiased = a - (112u << 23);
  uint32_t normal = (rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13;
  normal = normal < 0x7c00u ? normal : 0x7c00u;
  const uint32_t e = (a >> 23) < 113u ? (a >> 23) : 113u;
  const uint32_t m = (a & 0x007fffffu) | 0x00800000u;
  uint32_t shift = 126u - e;
  shift = shift < 31u ? shift : 31u;
  const uint32_t sub = (m + ((1u << (shift - 1u)) - 1u) + ((m >> shift) & 1u)) >> shift;
  const uint32_t mag = a > 0x7f800000u ? nan : (a < 0x38800000u ? sub : normal);
  return static_cast<uint16_t>(sign | mag);
}

__device__ __forceinline__ float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t a = static_cast<uint32_t>(h) & 0x7fffu;
  const uint32_t normal = (a << 13) + (112u << 23) + (a >= 0x7c00u ? (112u << 23) : 0u);
  const uint32_t sub = __float_as_uint(__fmul_rn(static_cast<float>(static_cast<int32_t>(a)), 0x1p-24f));
  return __uint_as_float(sign | (a < 0x0400u ? sub : normal));
}

__device__ __forceinline__ float to_float(DevBf16 v) { return bf16_bits_to_float(v.bits); }
__device__ __forceinline__ float to_float(DevF16 v) { return f16_bits_to_float(v.bits); }
template <typename H>
__device__ __forceinline__ H from_float(float f) {
  if constexpr (std::is_same_v<H, DevBf16>) return DevBf16{float_to_bf16_bits(f)};
  else return DevF16{float_to_f16_bits(f)};
}

// cpu::copy_kernels' cast_value: halves go through float.
template <typename To, typename From>
__device__ __forceinline__ To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<To> && is_half_v<From>) {
    return from_float<To>(to_float(v));
  } else if constexpr (is_half_v<To>) {
    return from_float<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<From>) {
    return static_cast<To>(to_float(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename To, typename From>
struct Cast {
  __device__ __forceinline__ To operator()(From v) const { return cast_value<To, From>(v); }
};

}  // namespace
}  // namespace uoe::cuda
