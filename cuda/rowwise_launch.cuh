// The host side of the CUDA row kernels (cuda/rowwise_kernels.cu, cuda/cross_entropy_kernels.cu): the choice of
// vector width and threads per row, and grid sizes. Compiled by nvcc only.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/rowwise_device.cuh"
#include "cuda/stream.h"

namespace uoe::cuda::rowwise {

template <int N>
using IntC = std::integral_constant<int, N>;

// Calls f(IntC<V>, IntC<TPR>) with 16-byte vectors when n and every non-null pointer allow it, and threads per
// row picked from the row length (a function of the shape only).
template <class T, class F>
void dispatch_rows(int64_t n, std::initializer_list<const void*> ptrs, F&& f) {
  constexpr int kV = int(16 / sizeof(T));
  bool vec = n % kV == 0;
  for (const void* p : ptrs) vec = vec && (!p || aligned16(p));
  if (vec) {
    const int64_t nv = n / kV;
    if (nv <= 256) f(IntC<kV>{}, IntC<32>{});
    else if (nv <= 1024) f(IntC<kV>{}, IntC<128>{});
    else if (nv <= 4096) f(IntC<kV>{}, IntC<256>{});
    else f(IntC<kV>{}, IntC<512>{});
  } else {
    if (n <= 256) f(IntC<1>{}, IntC<32>{});
    else f(IntC<1>{}, IntC<256>{});
  }
}

// Blocks for `groups` row groups of TPR threads (grid-stride loops cover any excess).
template <int TPR>
unsigned grid_for(int64_t groups) {
  const int64_t blocks = (groups + Group<TPR>::kPerBlock - 1) / Group<TPR>::kPerBlock;
  return unsigned(std::clamp<int64_t>(blocks, 1, int64_t(1) << 24));
}

}  // namespace uoe::cuda::rowwise
