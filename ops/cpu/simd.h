// The CPU kernels' vector toolkit: UOE_SIMD (one function compiled per ISA, core/simd.h), the vm:: math, and sums in a
// fixed order.
#pragma once

#include <cstdint>

#include "core/simd.h"
#include "vec_math.h"

namespace uoe::cpu {

// sum_j term(j) for j in [0, n), added in one fixed order, never the one a vectoriser picks: lane l of kFixedSumLanes
// accumulators takes the terms j = l (mod kFixedSumLanes) in increasing j, then the lanes are added pairwise
// (l += l + kFixedSumLanes/2, ...). GCC vectorised `omp simd reduction` loops differently per element type (under
// x86-64-v3 one 8-lane accumulator for a float row, two for a bfloat16 row), so a bfloat16 row's sum could differ in
// the last bit from its float32 widening's; in this order it cannot. Inline into a UOE_SIMD function (the lanes
// vectorise with its ISA); mark the term lambda UOE_FIXED_SUM_TERM so that it is inlined too.
#define UOE_FIXED_SUM_TERM __attribute__((always_inline))
constexpr int kFixedSumLanes = 16;
// The same sum taken in consecutive pieces: add(n, term) adds the next n terms (term(0) is the piece's first). Pieces
// whose lengths are multiples of kFixedSumLanes keep fixed_order_sum's order; only the last may be shorter.
template <class T>
struct FixedOrderSum {
  T acc[kFixedSumLanes] = {};
  template <class Term>
  inline __attribute__((always_inline)) void add(int64_t n, Term&& term) {
    int64_t j = 0;
    for (; j + kFixedSumLanes <= n; j += kFixedSumLanes) {
#pragma omp simd
      for (int l = 0; l < kFixedSumLanes; ++l) acc[l] += term(j + l);
    }
    for (int l = 0; j + l < n; ++l) acc[l] += term(j + l);
  }
  inline __attribute__((always_inline)) T total() {
    for (int w = kFixedSumLanes / 2; w > 0; w /= 2) {
#pragma omp simd
      for (int l = 0; l < w; ++l) acc[l] += acc[l + w];
    }
    return acc[0];
  }
};
template <class T, class Term>
inline __attribute__((always_inline)) T fixed_order_sum(int64_t n, Term&& term) {
  FixedOrderSum<T> sum;
  sum.add(n, term);
  return sum.total();
}

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
