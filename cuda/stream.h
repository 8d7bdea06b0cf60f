// Devices and streams: the current device and the stream every kernel of this library launches on.
#pragma once
#include <cuda_runtime.h>

namespace uoe::cuda {

// The stream kernels and copies on `device` are issued to (the device's default stream unless a StreamGuard
// is alive on this thread).
cudaStream_t current_stream(int device);

// Makes `device` the current CUDA device of this thread, returning the one that was; leave_device makes it current
// again and never raises. DeviceGuard's two halves, registered with core (core/device_scope.h) at start-up.
int enter_device(int device);
void leave_device(int previous) noexcept;

// While alive: `device` is the current CUDA device of this thread (restored afterwards).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_;
};

// While alive: current_stream(device) is `stream` on this thread. Tensors allocated on another stream and used
// here need cuda::record_stream (cuda/caching_allocator.h) before they are freed.
class StreamGuard {
 public:
  StreamGuard(int device, cudaStream_t stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  int device_;
  cudaStream_t previous_;
};

// A CUDA event (timing or cross-stream ordering), destroyed with the object.
class Event {
 public:
  explicit Event(bool timing = false);
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  void record(cudaStream_t stream);
  void wait(cudaStream_t stream) const;  // stream waits until the event has completed
  void synchronize() const;
  // cudaSuccess once the recorded work has completed, cudaErrorNotReady before; never raises (for pollers on
  // other threads).
  cudaError_t query() const { return cudaEventQuery(event_); }
  float elapsed_ms(const Event& start) const;  // both recorded with timing = true

 private:
  cudaEvent_t event_ = nullptr;
};

// Blocks until all work on `device` has finished; errors raised by earlier asynchronous kernels surface here,
// named with `op`.
void synchronize(int device, const char* op);

}  // namespace uoe::cuda
