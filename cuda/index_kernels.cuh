// The CUDA indexing kernels (launched by cuda/index_kernels.cu; run on the CPU by uoe_cuda_emu_tests): index_select
// and gather move element bits; index_add and scatter_add add, without atomics, each run of equal sorted targets in
// ascending order of position (the CPU's order), one thread per run; the range check keeps the first bad position.
#pragma once
#include <cstdint>

#include "cuda/strided_index.cuh"

namespace uoe::cuda {
namespace {

// ---- index_select ----------------------------------------------------------------------------------
// out[o, i, c] = x[o, idx[i], c]; U: the element bits.
template <typename U>
__global__ void index_select_kernel(const U* __restrict__ x, const int64_t* __restrict__ idx, U* __restrict__ out,
                                    int64_t n, int64_t m, int64_t inner, int64_t total) {
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total; w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = w % inner, oi = w / inner;
    const int64_t i = oi % m, o = oi / m;
    out[w] = x[(o * n + idx[i]) * inner + c];
  }
}

// ---- stable sort of index targets ----------------------------------------------------------------------
__global__ void iota_kernel(int64_t* __restrict__ p, int64_t n) {
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < n; w += int64_t(gridDim.x) * blockDim.x) {
    p[w] = w;
  }
}

// ---- index_add -----------------------------------------------------------------------------------------
// Thread (o, p, c) with p the first of a run of equal sorted targets j: out[o, j, c] += src[o, i, c] for the
// run's positions i, in ascending order. out: [outer, n, inner], src: [outer, m, inner], both contiguous.
template <typename T>
__global__ void index_add_kernel(T* __restrict__ out, const T* __restrict__ src, const int64_t* __restrict__ keys,
                                 const int64_t* __restrict__ pos, int64_t n, int64_t m, int64_t inner, int64_t total) {
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total; w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = w % inner, op = w / inner;
    const int64_t p = op % m, o = op / m;
    const int64_t j = keys[p];
    if (p > 0 && keys[p - 1] == j) continue;  // not the head of its run
    T* dst = out + (o * n + j) * inner + c;
    T acc = *dst;
    for (int64_t q = p; q < m && keys[q] == j; ++q) acc += src[(o * m + pos[q]) * inner + c];
    *dst = acc;
  }
}

// ---- gather / scatter_add ----------------------------------------------------------------------------
// Lines are all coordinates but dim (index's lines shape); `lines` maps a line number to each operand's element
// offset of the line start. gather: operands (out, x, idx).
template <typename U>
__global__ void gather_kernel(U* __restrict__ out, const U* __restrict__ x, const int64_t* __restrict__ idx,
                              OffsetCalc<3> lines, int64_t m, int64_t out_s, int64_t x_s, int64_t idx_s,
                              int64_t total) {
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total; w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = w % m, l = w / m;
    int64_t off[3];
    lines.get(uint64_t(l), off);
    out[off[0] + j * out_s] = x[off[1] + idx[off[2] + j * idx_s] * x_s];
  }
}

// keys[l*m + j] = l*n + idx[line l, j]: the target element of each index position (operands (idx)).
__global__ void line_keys_kernel(int64_t* __restrict__ keys, const int64_t* __restrict__ idx, OffsetCalc<1> lines,
                                 int64_t n, int64_t m, int64_t idx_s, int64_t total) {
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total; w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = w % m, l = w / m;
    int64_t off[1];
    lines.get(uint64_t(l), off);
    keys[w] = l * n + idx[off[0] + j * idx_s];
  }
}

// Thread p, when it heads a run of equal sorted keys q = l*n + t: out[line l, t] += src[line l, j] over the run's
// positions l*m + j, in ascending order of j. lines: operands (out, src).
template <typename T>
__global__ void scatter_add_kernel(T* __restrict__ out, const T* __restrict__ src, const int64_t* __restrict__ keys,
                                   const int64_t* __restrict__ pos, OffsetCalc<2> lines, int64_t n, int64_t m,
                                   int64_t out_s, int64_t src_s, int64_t total) {
  for (int64_t p = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; p < total; p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t q = keys[p];
    if (p > 0 && keys[p - 1] == q) continue;
    const int64_t l = q / n, t = q % n;
    int64_t off[2];
    lines.get(uint64_t(l), off);
    T* dst = out + off[0] + t * out_s;
    T acc = *dst;
    for (int64_t r = p; r < total && keys[r] == q; ++r) acc += src[off[1] + (pos[r] - l * m) * src_s];
    *dst = acc;
  }
}

// ---- index range check ----------------------------------------------------------------------------------
__global__ void out_of_range_kernel(const int64_t* __restrict__ idx, int64_t n, int64_t size,
                                    unsigned long long* __restrict__ first) {
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < n; w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t v = idx[w];
    if (v < 0 || v >= size) atomicMin(first, static_cast<unsigned long long>(w));
  }
}

}  // namespace
}  // namespace uoe::cuda
