// The random kernel family, one declaration list for both backends: fills from the library's counter-based
// Philox4x32-10 stream (core/rng.h), the same bits on both. Implemented in ops/cpu/random_kernels.cpp (through
// core/rng.h) and cuda/random_kernels.cu (asynchronous on the device's current stream); a build without CUDA links
// stubs that raise (cuda/stub/). Callers pick the backend with UOE_KERNEL (ops/backend.h).
#pragma once
#include <cstdint>

#include "core/tensor.h"

#define UOE_RANDOM_KERNELS                                                                                        \
  /* out (contiguous float32 or float64) = U[low, high) numbers bit-identical to                                  \
     uoe::fill_uniform(ptr, out.numel(), seed, start, low, high) (start a multiple of 4, as Generator::reserve    \
     returns; reserve out.numel() * kRngWordsPerFloat / kRngWordsPerDouble words). */                             \
  void fill_uniform(const Tensor& out, uint64_t seed, uint64_t start, double low, double high);

namespace uoe::cpu {
UOE_RANDOM_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_RANDOM_KERNELS
}  // namespace uoe::cuda

#undef UOE_RANDOM_KERNELS
