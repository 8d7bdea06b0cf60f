// The kernels of the CUDA elementwise loop (launched by cuda/elementwise_loop.cuh; run on the CPU by
// uoe_cuda_emu_tests): a grid-stride loop over contiguous operands (and broadcast scalars) with 4-wide vector loads
// and a scalar tail, and a strided loop through OffsetCalc. f is a functor with a __device__ operator().
#pragma once
#include <cuda/std/tuple>

#include <cstdint>
#include <utility>

#include "cuda/strided_index.cuh"

namespace uoe::cuda {
namespace ew {

template <int N>
struct Ptrs {
  char* p[N];  // p[0]: the output
};

template <typename T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

// V consecutive elements from base, or V copies of element 0 when the operand is broadcast (stride 0).
template <typename T, int V>
__device__ __forceinline__ Vec<T, V> load_vec(const char* p, int64_t stride, int64_t base) {
  const T* q = reinterpret_cast<const T*>(p);
  if (stride == 0) {
    Vec<T, V> r;
    const T x = q[0];
#pragma unroll
    for (int v = 0; v < V; ++v) r.v[v] = x;
    return r;
  }
  return *reinterpret_cast<const Vec<T, V>*>(q + base);
}

template <int V, typename Out, typename... In, typename F, size_t... I>
__device__ __forceinline__ void flat_step(const F& f, char* const* p, const int64_t* s, int64_t base,
                                          std::index_sequence<I...>) {
  [[maybe_unused]] const ::cuda::std::tuple<Vec<In, V>...> r(load_vec<In, V>(p[I + 1], s[I + 1], base)...);  // none for a fill
  Vec<Out, V> o;
#pragma unroll
  for (int v = 0; v < V; ++v) o.v[v] = f(::cuda::std::get<I>(r).v[v]...);
  *reinterpret_cast<Vec<Out, V>*>(reinterpret_cast<Out*>(p[0]) + base) = o;
}

// Flat loop: every operand has stride 0 or 1 (the output 1), vector-aligned. Vectors of V elements, then a scalar
// tail of n % V elements.
template <int V, typename Out, typename F, typename... In>
__global__ void flat_kernel(F f, Ptrs<sizeof...(In) + 1> ptrs, OffsetCalc<sizeof...(In) + 1> calc, int64_t n) {
  constexpr int N = sizeof...(In) + 1;
  int64_t s[N];
#pragma unroll
  for (int k = 0; k < N; ++k) s[k] = calc.strides[0][k];
  const int64_t step = int64_t(gridDim.x) * blockDim.x;
  const int64_t first = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nvec = n / V;
  constexpr auto seq = std::index_sequence_for<In...>{};
  for (int64_t w = first; w < nvec; w += step) flat_step<V, Out, In...>(f, ptrs.p, s, w * V, seq);
  if constexpr (V > 1) {
    for (int64_t i = nvec * V + first; i < n; i += step) flat_step<1, Out, In...>(f, ptrs.p, s, i, seq);
  }
}

template <typename Out, typename... In, typename F, size_t... I>
__device__ __forceinline__ void strided_step(const F& f, char* const* p, const int64_t* off,
                                             std::index_sequence<I...>) {
  reinterpret_cast<Out*>(p[0])[off[0]] = f(reinterpret_cast<const In*>(p[I + 1])[off[I + 1]]...);
}

template <typename Index, typename Out, typename F, typename... In>
__global__ void strided_kernel(F f, Ptrs<sizeof...(In) + 1> ptrs, OffsetCalc<sizeof...(In) + 1> calc, Index n) {
  constexpr int N = sizeof...(In) + 1;
  const Index step = Index(gridDim.x) * blockDim.x;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t off[N];
    calc.get(i, off);
    strided_step<Out, In...>(f, ptrs.p, off, std::index_sequence_for<In...>{});
  }
}

constexpr int kVec = 4;

template <typename T>
bool vec_aligned(const void* p, int64_t stride) {
  return stride == 0 || reinterpret_cast<uintptr_t>(p) % alignof(Vec<T, kVec>) == 0;
}

}  // namespace ew

}  // namespace uoe::cuda
