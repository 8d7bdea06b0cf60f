// CUDA random fills from the library's counter-based Philox4x32-10 stream: the same numbers as core/rng.h.
#pragma once
#include <cstdint>

#include "core/tensor.h"

namespace uoe::cuda {

// out (contiguous float32 or float64 on a GPU) = U[low, high) numbers bit-identical to
// uoe::fill_uniform(ptr, out.numel(), seed, start, low, high) on the CPU (start a multiple of 4, as
// Generator::reserve returns; reserve out.numel() * kRngWordsPerFloat / kRngWordsPerDouble words).
void fill_uniform(const Tensor& out, uint64_t seed, uint64_t start, double low, double high);

}  // namespace uoe::cuda
