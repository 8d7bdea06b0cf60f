// The CPU kernels' vector toolkit: UOE_SIMD (one function compiled per ISA, core/simd.h) and the vm:: math.
#pragma once

#include <cstdint>

#include "core/simd.h"
#include "vec_math.h"

namespace uoe::cpu {

// Σ v[j]² in float64, in vector lanes (one sequential chain of float64 adds ran at the add's latency: the gradient
// norm took 1.5% of a tiny-moe bf16 step, group_l2norm 0.9% of a tiny-uoe one). T: float, double or bfloat16.
template <typename T>
UOE_SIMD double sum_of_squares(const T* v, int64_t n) {
  double acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t j = 0; j < n; ++j) acc += double(v[j]) * double(v[j]);
  return acc;
}

}  // namespace uoe::cpu
