// Byte copies across devices for core code (collectives, the safetensors writer), which links below the op layer and
// so cannot call Tensor::to(), contiguous() or copy_(): the CPU's memcpy, or the copy that the CUDA backend registers
// at start-up (as it registers its allocator, core/allocator.h). No dtype conversion happens here.
#pragma once
#include <cstddef>

#include "core/device.h"
#include "core/tensor.h"

namespace uoe {

// Copies `nbytes` from `src` on `src_device` to `dst` on `dst_device` and waits for it: both buffers may be reused
// at once.
using DeviceCopy = void (*)(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);
// Installed by the CUDA backend at start-up.
void register_cuda_copy(DeviceCopy copy);

// A DeviceCopy between any two devices; a CUDA device raises in a build without CUDA or without a visible GPU.
void copy_across_devices(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes);

// `t`'s elements in row-major order in a contiguous CPU tensor of its dtype and shape: `t` itself when it is one,
// else a copy (no autograd history).
Tensor host_contiguous(const Tensor& t);

}  // namespace uoe
