// CPU copy with dtype conversion between any strided tensors.
#pragma once
#include "core/tensor.h"

namespace uoe::cpu {

// dst[...] = cast(src[...]) with src broadcast to dst's shape; any dtypes and strides.
void copy_cast(const Tensor& dst, const Tensor& src);
// Fills every element of dst (any strides) with value converted to dst's dtype.
void fill(const Tensor& dst, double value);

}  // namespace uoe::cpu
