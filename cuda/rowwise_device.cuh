// The device side of the CUDA row kernels (cuda/rowwise_kernels.cuh, cuda/cross_entropy_kernels.cuh): device math,
// 16-byte vectors, the online max / sum-of-exp, warp and block reductions, row groups. No host code:
// uoe_cuda_emu_tests compiles it against a stand-in CUDA runtime.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "cuda/storage_access.cuh"

namespace uoe::cuda::rowwise {

// ---- device math (float and double overloads) -------------------------------------------------------------
__device__ __forceinline__ float dexp(float x) { return expf(x); }
__device__ __forceinline__ double dexp(double x) { return exp(x); }
__device__ __forceinline__ float dlog(float x) { return logf(x); }
__device__ __forceinline__ double dlog(double x) { return log(x); }
__device__ __forceinline__ float dsqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double dsqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float dmax(float a, float b) { return fmaxf(a, b); }  // ignores a NaN operand
__device__ __forceinline__ double dmax(double a, double b) { return fmax(a, b); }
template <class T>
__device__ __forceinline__ T neg_inf() { return T(-INFINITY); }
template <class T>
__device__ __forceinline__ bool is_inf(T v) { return v == T(INFINITY) || v == T(-INFINITY); }

// V consecutive elements, loaded and stored as one 16-byte access when V * sizeof(T) == 16.
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};
// A vector of storage S in the compute type C, and back (storage_access.cuh: bfloat16 rounded to nearest even).
template <class C, class S, int V>
__device__ __forceinline__ Vec<C, V> widen(const Vec<S, V>& x) {
  Vec<C, V> r;
#pragma unroll
  for (int k = 0; k < V; ++k) r.v[k] = load_as<C>(&x.v[k]);
  return r;
}
template <class S, class C, int V>
__device__ __forceinline__ Vec<S, V> narrow(const Vec<C, V>& x) {
  Vec<S, V> r;
#pragma unroll
  for (int k = 0; k < V; ++k) store_as(&r.v[k], x.v[k]);
  return r;
}

// ---- online max / sum-of-exp (one pass) -------------------------------------------------------------------
// s = sum_j exp(x_j - m) over the elements seen, m their max. -inf entries are skipped (they add 0), so a state
// that saw only -inf is the empty state {-inf, 0}; NaN and +inf make s NaN, as in the CPU's two-pass sum.
template <class T>
struct Online {
  T m, s;
};
template <class T>
__device__ __forceinline__ Online<T> merge(Online<T> a, Online<T> b) {
  const T m = dmax(a.m, b.m);
  const T sa = a.s == T(0) ? T(0) : a.s * dexp(a.m - m);  // a.s == 0: empty (a.m may be -inf)
  const T sb = b.s == T(0) ? T(0) : b.s * dexp(b.m - m);
  return {m, sa + sb};  // commutative bit for bit: every lane of a butterfly ends with the same value
}
template <class T, int V>
__device__ __forceinline__ void online_add(Online<T>& st, const Vec<T, V>& x) {
  T vm = x.v[0];
#pragma unroll
  for (int k = 1; k < V; ++k) vm = dmax(vm, x.v[k]);
  if (vm > st.m) {
    st.s = st.s == T(0) ? T(0) : st.s * dexp(st.m - vm);
    st.m = vm;
  }
#pragma unroll
  for (int k = 0; k < V; ++k)
    if (x.v[k] != neg_inf<T>()) st.s += dexp(x.v[k] - st.m);
}
// The row's (max, sum) as the CPU's two-pass sum would give it: NaN when the max is infinite (all -inf, or +inf).
template <class T>
__device__ __forceinline__ Online<T> finalize(Online<T> st) {
  if (is_inf(st.m)) st.s = T(NAN);
  return st;
}

// ---- group reductions -------------------------------------------------------------------------------------
struct Plus {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Max {
  template <class T>
  __device__ T operator()(T a, T b) const { return a > b ? a : b; }
};
struct Min {
  template <class T>
  __device__ T operator()(T a, T b) const { return a < b ? a : b; }
};
struct Merge {
  template <class T>
  __device__ Online<T> operator()(Online<T> a, Online<T> b) const { return merge(a, b); }
};

template <class T>
__device__ __forceinline__ T shfl_xor(T v, int o) { return __shfl_xor_sync(0xffffffffu, v, o); }
template <class T>
__device__ __forceinline__ Online<T> shfl_xor(Online<T> v, int o) {
  return {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
}

// Butterfly over the warp: every lane ends with op over all 32 lanes (op commutative, so bit-identical).
template <class T, class Op>
__device__ __forceinline__ T warp_allreduce(T v, Op op) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = op(v, shfl_xor(v, o));
  return v;
}

// Threads per row TPR: 32 (a warp per row, 4 rows per block) or 128..1024 in whole warps (a block per row).
template <int TPR>
struct Group {
  static_assert(TPR == 32 || (TPR % 32 == 0 && TPR >= 128 && TPR <= 1024), "a warp, or a whole block of warps");
  static constexpr int kPerBlock = TPR >= 128 ? 1 : 128 / TPR;
  static constexpr int kBlock = TPR * kPerBlock;
  __device__ static int lane() { return int(threadIdx.x) % TPR; }
  __device__ static int64_t first() { return int64_t(blockIdx.x) * kPerBlock + int64_t(threadIdx.x) / TPR; }
  __device__ static int64_t stride() { return int64_t(gridDim.x) * kPerBlock; }
};

// op over the TPR threads of this group; every thread gets the result. All threads of the group must call it
// (a block-wide barrier when TPR > 32). `identity` pads the second stage.
template <int TPR, class T, class Op>
__device__ __forceinline__ T group_allreduce(T v, Op op, T identity) {
  v = warp_allreduce(v, op);
  if constexpr (TPR > 32) {
    __shared__ T buf[TPR / 32];
    const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
    if (lane == 0) buf[warp] = v;
    __syncthreads();
    v = warp_allreduce(lane < TPR / 32 ? buf[lane] : identity, op);
    __syncthreads();  // buf is reused by the next reduction
  } else {
    (void)identity;
  }
  return v;
}
template <int TPR, class T>
__device__ __forceinline__ T group_sum(T v) { return group_allreduce<TPR>(v, Plus{}, T(0)); }

}  // namespace uoe::cuda::rowwise
