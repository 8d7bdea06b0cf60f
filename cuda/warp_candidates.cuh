// Warp pieces shared by the CUDA reductions and top-k (cuda/reduce_kernels.cuh, cuda/topk_kernel.cuh): shuffles of
// any element type (int64_t through long long), and a (value, index) candidate with its NaN test.
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

namespace uoe::cuda {
namespace {

template <typename T>
__device__ __forceinline__ T shfl_down(T v, int delta) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(__shfl_down_sync(0xffffffffu, static_cast<long long>(v), delta));
  } else {
    return __shfl_down_sync(0xffffffffu, v, delta);
  }
}

template <typename T>
__device__ __forceinline__ T shfl_lane0(T v) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(__shfl_sync(0xffffffffu, static_cast<long long>(v), 0));
  } else {
    return __shfl_sync(0xffffffffu, v, 0);
  }
}

// A candidate of an arg-reduction: a value and its index (-1: no candidate).
template <typename T>
struct Cand {
  T v;
  int64_t i;
};

template <typename T>
__device__ __forceinline__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return isnan(v);
  else return false;
}

}  // namespace
}  // namespace uoe::cuda
