// The CUDA top-k kernel (launched by cuda/index_kernels.cu; run on the CPU by uoe_cuda_emu_tests): one row per warp
// or per block, k passes, each picking the first element in output order after the previous pick.
#pragma once
#include <cstdint>

#include "cuda/strided_index.cuh"
#include "cuda/warp_candidates.cuh"

namespace uoe::cuda {
namespace {

// a comes before b in the output: larger (smaller) value first, NaN counted as the largest, ties by lower index.
template <typename T>
__device__ __forceinline__ bool before(const Cand<T>& a, const Cand<T>& b, bool largest) {
  if (b.i < 0) return a.i >= 0;
  if (a.i < 0) return false;
  const bool an = is_nan(a.v), bn = is_nan(b.v);
  if (an || bn) {
    if (an && bn) return a.i < b.i;
    return an == largest;
  }
  if (a.v != b.v) return largest ? a.v > b.v : a.v < b.v;
  return a.i < b.i;
}

template <typename T>
__device__ __forceinline__ Cand<T> warp_first(Cand<T> c, bool largest) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) {
    const Cand<T> o{shfl_down(c.v, d), shfl_down(c.i, d)};
    if (before(o, c, largest)) c = o;
  }
  return c;
}

// One row per group of THREADS threads (32: a warp, 256: the block). k passes; pass s picks the first element
// (in output order) after the one pass s-1 picked.
template <typename T, int THREADS>
__global__ void topk_kernel(const T* __restrict__ x, T* __restrict__ vals, int64_t* __restrict__ idxs, int64_t rows,
                            int64_t n, int64_t k, bool largest) {
  constexpr int kPerBlock = kThreads / THREADS;
  __shared__ Cand<T> smem[kThreads / 32];
  __shared__ Cand<T> picked[kPerBlock];
  const int sub = threadIdx.x / THREADS, lane = threadIdx.x % THREADS;
  const int warp = threadIdx.x / 32, wlane = threadIdx.x % 32;
  for (int64_t base = int64_t(blockIdx.x) * kPerBlock; base < rows; base += int64_t(gridDim.x) * kPerBlock) {
    const int64_t r = base + sub;
    const T* row = x + (r < rows ? r : 0) * n;
    Cand<T> prev{T(0), -1};
    for (int64_t s = 0; s < k; ++s) {
      Cand<T> best{T(0), -1};
      if (r < rows) {
        for (int64_t j = lane; j < n; j += THREADS) {
          const Cand<T> c{row[j], j};
          if ((prev.i < 0 || before(prev, c, largest)) && before(c, best, largest)) best = c;
        }
      }
      best = warp_first(best, largest);
      if constexpr (THREADS > 32) {
        if (wlane == 0) smem[warp] = best;
        __syncthreads();
        if (warp == 0) {
          best = wlane < THREADS / 32 ? smem[wlane] : Cand<T>{T(0), -1};
          best = warp_first(best, largest);
          if (wlane == 0) picked[0] = best;
        }
        __syncthreads();
        best = picked[0];
        __syncthreads();
      } else {
        best = Cand<T>{shfl_lane0(best.v), shfl_lane0(best.i)};  // lane 0 holds the warp's pick
      }
      if (lane == 0 && r < rows) {
        vals[r * k + s] = best.v;
        idxs[r * k + s] = best.i;
      }
      prev = best;
    }
  }
}

}  // namespace
}  // namespace uoe::cuda
