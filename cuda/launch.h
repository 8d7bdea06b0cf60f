// Host-side helpers shared by the CUDA kernel files: the device and stream a launch goes to, and scratch memory.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "core/allocator.h"
#include "cuda/check.h"
#include "cuda/stream.h"

namespace uoe::cuda {

// Whether p is 16-byte aligned: what vector loads, ldmatrix tiles and cuBLAS's grouped call need.
inline bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// The current device and the stream this library issues its work to on it.
struct LaunchContext {
  int device;
  cudaStream_t stream;
};

inline LaunchContext launch_context(const char* op) {
  int device = 0;
  UOE_CUDA_CHECK(op, cudaGetDevice(&device));
  return {device, current_stream(device)};
}

// Device scratch from the library's CUDA allocator, returned when the object dies. Work already issued on the
// stream keeps the stream order the allocator relies on.
class DeviceBuffer {
 public:
  DeviceBuffer(int device, size_t bytes) : alloc_(&allocator_for(Device::cuda(device))), bytes_(bytes) {
    if (bytes_) ptr_ = alloc_->allocate(bytes_, Device::cuda(device));
  }
  ~DeviceBuffer() {
    if (ptr_) alloc_->deallocate(ptr_, bytes_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  template <typename T>
  T* get() const {
    return static_cast<T*>(ptr_);
  }

 private:
  Allocator* alloc_;
  size_t bytes_;
  void* ptr_ = nullptr;
};

}  // namespace uoe::cuda
