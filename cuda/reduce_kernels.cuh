// The CUDA reduction kernels (launched by cuda/reduce_kernels.cu; run on the CPU by uoe_cuda_emu_tests): row sums
// (a warp or a block per output), column sums (a thread per column and chunk of rows), and min / max with the index
// of the first best element. Every output's reduction tree depends only on the shape.
#pragma once
#include <cstdint>

#include "cuda/strided_index.cuh"
#include "cuda/warp_candidates.cuh"

namespace uoe::cuda {
namespace {

// Sum over the THREADS threads of a row group (THREADS = 32: one warp; 256: the whole block, `smem` holds 8
// values). Fixed tree; the result is valid in thread 0 of the group.
template <int THREADS, typename T>
__device__ __forceinline__ T group_sum(T v, T* smem) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += shfl_down(v, d);
  if constexpr (THREADS > 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
      v = lane < THREADS / 32 ? smem[lane] : T(0);
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) v += shfl_down(v, d);
    }
    __syncthreads();  // smem is reused by the next row
  }
  return v;
}

// out[w], w in [0, K * segs): the sum of segment c = w % segs (elements [c*seg, min(R, (c+1)*seg))) of row
// k = w / segs of x [K, R]. THREADS threads per output, 256 / THREADS outputs per block.
template <typename T, int THREADS>
__global__ void row_sum_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t K, int64_t R, int64_t seg,
                               int64_t segs) {
  constexpr int kPerBlock = kThreads / THREADS;
  __shared__ T smem[kThreads / 32];
  const int sub = threadIdx.x / THREADS, lane = threadIdx.x % THREADS;
  const int64_t outputs = K * segs;
  for (int64_t base = int64_t(blockIdx.x) * kPerBlock; base < outputs; base += int64_t(gridDim.x) * kPerBlock) {
    const int64_t w = base + sub;
    T acc = T(0);
    if (w < outputs) {
      const int64_t k = w / segs, c = w % segs;
      const int64_t begin = c * seg, end = begin + seg < R ? begin + seg : R;
      const T* row = x + k * R;
      for (int64_t i = begin + lane; i < end; i += THREADS) acc += row[i];
    }
    acc = group_sum<THREADS>(acc, smem);
    if (lane == 0 && w < outputs) out[w] = acc;
  }
}

// out[c*K + k] = sum of x[r*K + k] over rows r in chunk c ([c*rows, min(R, (c+1)*rows))), in order of r.
template <typename T>
__global__ void column_sum_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t R, int64_t K, int64_t rows,
                                  int64_t chunks) {
  const int64_t total = K * chunks;
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total; w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = w / K, k = w % K;
    const int64_t begin = c * rows, end = begin + rows < R ? begin + rows : R;
    T acc = T(0);
    for (int64_t r = begin; r < end; ++r) acc += x[r * K + k];
    out[w] = acc;
  }
}

// ---- min / max ---------------------------------------------------------------------------------------
// The better of two candidates: NaN beats numbers, then the larger (smaller) value, then the lower index. This
// is associative and commutative, and picks what the CPU's first-occurrence scan picks.
template <typename T>
__device__ __forceinline__ Cand<T> better(Cand<T> a, Cand<T> b, bool is_max) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  const bool an = is_nan(a.v), bn = is_nan(b.v);
  if (an || bn) {
    if (an && bn) return a.i < b.i ? a : b;
    return an ? a : b;
  }
  if (a.v == b.v) return a.i < b.i ? a : b;
  return (is_max ? a.v > b.v : a.v < b.v) ? a : b;
}

template <typename T>
__device__ __forceinline__ Cand<T> shfl_down(Cand<T> c, int delta) {
  return {shfl_down(c.v, delta), shfl_down(c.i, delta)};
}

template <int THREADS, typename T>
__device__ __forceinline__ Cand<T> group_best(Cand<T> c, Cand<T>* smem, bool is_max) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) c = better(c, shfl_down(c, d), is_max);
  if constexpr (THREADS > 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) smem[warp] = c;
    __syncthreads();
    if (warp == 0) {
      c = lane < THREADS / 32 ? smem[lane] : Cand<T>{T(0), -1};
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) c = better(c, shfl_down(c, d), is_max);
    }
    __syncthreads();
  }
  return c;
}

// vals[r], idxs[r] = best of row r of x [rows, n]; THREADS threads per row.
template <typename T, int THREADS>
__global__ void minmax_kernel(const T* __restrict__ x, T* __restrict__ vals, int64_t* __restrict__ idxs, int64_t rows,
                              int64_t n, bool is_max) {
  constexpr int kPerBlock = kThreads / THREADS;
  __shared__ Cand<T> smem[kThreads / 32];
  const int sub = threadIdx.x / THREADS, lane = threadIdx.x % THREADS;
  for (int64_t base = int64_t(blockIdx.x) * kPerBlock; base < rows; base += int64_t(gridDim.x) * kPerBlock) {
    const int64_t r = base + sub;
    Cand<T> c{T(0), -1};
    if (r < rows) {
      const T* row = x + r * n;
      for (int64_t j = lane; j < n; j += THREADS) c = better(c, Cand<T>{row[j], j}, is_max);
    }
    c = group_best<THREADS>(c, smem, is_max);
    if (lane == 0 && r < rows) {
      vals[r] = c.v;
      idxs[r] = c.i;
    }
  }
}

}  // namespace
}  // namespace uoe::cuda
