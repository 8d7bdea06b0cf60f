// CUDA rotary position embedding kernel (twin of ops/cpu/rope_kernels.h).
#pragma once
#include "core/tensor.h"

namespace uoe::cuda {

// x: contiguous float32/float64/bfloat16 (rotated in float32) [B, T, H, Dh] on a GPU (Dh even) -> rotated copy
// on the same GPU; inverse rotates
// by the negative angle (the backward). Pairs (i, i + Dh/2) of position p = t + pos_offset turn by
// p * base^(-2i/Dh); the angle, its cosine and sine are computed in double as on the CPU, then rounded to the
// dtype. Asynchronous on cuda::current_stream of x's device.
Tensor rope(const Tensor& x, double base, int64_t pos_offset, bool inverse);

}  // namespace uoe::cuda
