// The CUDA backend's entry points used by core and ops; a CPU-only build links stubs that raise.
#pragma once
#include <cstddef>

#include "core/device.h"

namespace uoe::cuda {

bool is_available();  // a CUDA build with at least one visible GPU
int device_count();
// Makes `device` the calling thread's current GPU. A process that trains on one GPU calls it first, so that what
// the CUDA runtime does on the current device (its context, the legacy default stream) happens on that GPU.
void set_device(int device);
// Copies n bytes between any two of host and GPU memory (synchronous).
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n);

}  // namespace uoe::cuda
