// The current GPU of the calling thread, switched for a scope. Core reaches the device through a hook that the CUDA
// backend registers at start-up (as it registers its allocator, core/allocator.h), so the layers above switch
// devices without a CUDA header.
#pragma once
#include "core/device.h"

namespace uoe {

// How the CUDA backend switches the calling thread's current GPU: enter(device) makes `device` current and returns
// the one that was (raising on failure); leave(previous) makes `previous` current again and never raises.
struct CudaDeviceSwitch {
  int (*enter)(int device);
  void (*leave)(int previous) noexcept;
};
// Installed by the CUDA backend at start-up.
void register_cuda_device_switch(CudaDeviceSwitch s);

// While alive: `device` is the current CUDA device of this thread (restored afterwards); nothing for the CPU.
class DeviceScope {
 public:
  explicit DeviceScope(Device device);
  ~DeviceScope();
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = -1;  // the GPU to make current again; -1: none (a CPU scope)
};

}  // namespace uoe
