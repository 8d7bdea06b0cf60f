// Stochastic rounding of float32 to bfloat16, for parameters stored in bfloat16: an update far smaller than the
// bfloat16 spacing still moves the parameter by the right amount on average (E[round(x)] = x), where round to
// nearest would drop it. The noise is a hash of the element's index in its parameter, the step and the new value,
// so every rank, and every sharding of a parameter (ZeRO), rounds the same element alike with no random state,
// while elements in the same state (a vector of ones) round independently.
// Integer functions of the bits, callable from host and device code.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define UOE_HOST_DEVICE __host__ __device__
#else
#define UOE_HOST_DEVICE
#endif

namespace uoe {

// 32 well-mixed bits of (element index, step, new value): murmur3's finaliser over their combination.
UOE_HOST_DEVICE inline uint32_t rounding_noise(uint64_t index, uint32_t step, uint32_t new_bits) {
  uint32_t h = uint32_t(index) ^ (uint32_t(index >> 32) * 0x27d4eb2fu) ^ (step * 0x85ebca6bu);
  h ^= h >> 15;
  h *= 0x2c1b3c6du;
  h ^= new_bits * 0x9e3779b9u;
  h ^= h >> 16;
  h *= 0x85ebca6bu;
  h ^= h >> 13;
  h *= 0xc2b2ae35u;
  h ^= h >> 16;
  return h;
}

// float32 bits -> bfloat16 bits, rounded up in magnitude with probability (dropped bits) / 2^16: adding 16 random
// bits below the kept ones carries into them exactly that often. NaN stays a quiet NaN, ±inf stays ±inf; a
// value within one bfloat16 spacing of the largest finite one may round to inf, like round to nearest.
UOE_HOST_DEVICE inline uint16_t bf16_round_stochastic(uint32_t f32_bits, uint32_t noise) {
  if ((f32_bits & 0x7f800000u) == 0x7f800000u)  // inf or NaN: truncate, keeping a NaN quiet
    return uint16_t((f32_bits >> 16) | ((f32_bits & 0x007fffffu) ? 0x0040u : 0u));
  return uint16_t((f32_bits + (noise & 0xffffu)) >> 16);
}

}  // namespace uoe
