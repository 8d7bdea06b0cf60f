// CUDA copy with dtype conversion between any strided device tensors, and fill (mirror of ops/cpu/copy_kernels.h).
#pragma once
#include "core/tensor.h"

namespace uoe::cuda {

// dst[...] = cast(src[...]) with src broadcast to dst's shape; any dtypes and strides; both on one GPU.
// Conversions are bit-identical to the CPU's (bf16/f16 round to nearest even through float, as core/half.h).
void copy_cast(const Tensor& dst, const Tensor& src);
// Fills every element of dst (any strides) with value converted to dst's dtype (as the CPU converts it).
void fill(const Tensor& dst, double value);

}  // namespace uoe::cuda
