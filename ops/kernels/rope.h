// The rope kernel family, one declaration list for both backends: rotary position embedding. Implemented in
// ops/cpu/rope_kernels.cpp and cuda/rope_kernels.cu (asynchronous on cuda::current_stream of x's device); a build
// without CUDA links stubs that raise (cuda/stub/). Callers pick the backend with UOE_KERNEL (ops/backend.h).
#pragma once
#include "core/tensor.h"

#define UOE_ROPE_KERNELS                                                                                          \
  /* x: contiguous [B, T, H, Dh] (Dh even), float32/float64, or bfloat16 (rotated in float32) -> rotated         \
     copy on x's device; inverse rotates by the negative angle (the backward). Pairs (i, i + Dh/2) of position    \
     p = t + pos_offset turn by p * base^(-2i/Dh); the angle, its cosine and sine are computed in double on both  \
     backends, then rounded to the dtype. */                                                                      \
  Tensor rope(const Tensor& x, double base, int64_t pos_offset, bool inverse);

namespace uoe::cpu {
UOE_ROPE_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_ROPE_KERNELS
}  // namespace uoe::cuda

#undef UOE_ROPE_KERNELS
