// Device loads and stores between a storage type and the type kernels compute in: float and double as they are,
// bfloat16 (__nv_bfloat16) computed in float32 and stored rounded to nearest even.
#pragma once
#include <cuda_bf16.h>

namespace uoe::cuda {

// The type a kernel computes in for storage S.
template <typename S>
struct ComputeType {
  using type = S;
};
template <>
struct ComputeType<__nv_bfloat16> {
  using type = float;
};
template <typename S>
using compute_t = typename ComputeType<S>::type;

template <typename C, typename S>
__device__ __forceinline__ C load_as(const S* p) {
  return C(*p);
}
template <>
__device__ __forceinline__ float load_as<float, __nv_bfloat16>(const __nv_bfloat16* p) {
  return __bfloat162float(*p);
}
template <typename S, typename C>
__device__ __forceinline__ void store_as(S* p, C v) {
  *p = S(v);
}
template <>
__device__ __forceinline__ void store_as<__nv_bfloat16, float>(__nv_bfloat16* p, float v) {
  *p = __float2bfloat16_rn(v);
}

}  // namespace uoe::cuda
