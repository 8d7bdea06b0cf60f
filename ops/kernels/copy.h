// The copy kernel family, one declaration list for both backends: copy with dtype conversion between strided
// tensors, and fill; the GPU's also copies bytes between devices. Implemented in ops/cpu/copy_kernels.cpp and
// cuda/copy_kernels.cu (on the device's current stream; both tensors on one GPU), the byte copy in
// cuda/runtime.cpp; a build without CUDA links stubs that raise (cuda/stub/). Callers pick the backend with
// UOE_KERNEL (ops/backend.h). Conversions are bit-identical on both backends (bf16/f16 round to
// nearest even through float, as core/half.h).
#pragma once
#include "core/tensor.h"

#define UOE_COPY_KERNELS                                                                         \
  /* dst[...] = cast(src[...]) with src broadcast to dst's shape; any dtypes and strides. */      \
  void copy_cast(const Tensor& dst, const Tensor& src);                                           \
  /* Fills every element of dst (any strides) with value converted to dst's dtype. */             \
  void fill(const Tensor& dst, double value);

namespace uoe::cpu {
UOE_COPY_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_COPY_KERNELS
// Copies n bytes between any two of host and GPU memory (synchronous): Tensor::to across devices.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n);
}  // namespace uoe::cuda

#undef UOE_COPY_KERNELS
