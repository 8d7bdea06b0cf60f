// Devices and streams (cuda/stream.h): the thread-local current stream per device, guards, events.
//
// Stream choice: the default current stream of every device is the legacy default stream (cudaStream_t
// nullptr). It orders every kernel, copy and cuBLASLt call of this library one after the other, and it
// synchronises with other blocking streams, so the caching allocator may hand a freed block to the next
// request at once (cuda/caching_allocator.h). A StreamGuard switches one thread to another stream; a tensor that
// work there reads or writes, allocated on another stream, is marked with cuda::record_stream (so that its
// memory is not reused before that work is done), or that work is ordered (Event::record / Event::wait) before
// the tensor is freed.
#include "cuda/stream.h"

#include <array>

#include "cuda/check.h"

namespace uoe::cuda {
namespace {

constexpr int kMaxDevices = 64;

// The current stream of each device on this thread; nullptr = the legacy default stream.
thread_local std::array<cudaStream_t, kMaxDevices> t_current{};

void check_device_index(int device, const char* op) {
  UOE_CHECK(device >= 0 && device < kMaxDevices, "[", op, "] CUDA device index ", device, " is out of range [0, ",
            kMaxDevices, ")");
}

}  // namespace

cudaStream_t current_stream(int device) {
  check_device_index(device, "current_stream");
  return t_current[size_t(device)];
}

int enter_device(int device) {
  int previous = 0;
  UOE_CUDA_CHECK("device guard", cudaGetDevice(&previous));
  if (device != previous) UOE_CUDA_CHECK("device guard", cudaSetDevice(device));
  return previous;
}

void leave_device(int previous) noexcept {
  int now = previous;
  // Must not throw (destructors call it): a failure here leaves the device as it is (the next checked call
  // reports it).
  if (cudaGetDevice(&now) == cudaSuccess && now != previous) (void)cudaSetDevice(previous);
}

DeviceGuard::DeviceGuard(int device) : previous_(enter_device(device)) {}

DeviceGuard::~DeviceGuard() { leave_device(previous_); }

StreamGuard::StreamGuard(int device, cudaStream_t stream) : device_(device), previous_(nullptr) {
  check_device_index(device, "stream guard");
  previous_ = t_current[size_t(device)];
  t_current[size_t(device)] = stream;
}

StreamGuard::~StreamGuard() { t_current[size_t(device_)] = previous_; }

Event::Event(bool timing) {
  UOE_CUDA_CHECK("event", cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

Event::~Event() {
  if (event_) (void)cudaEventDestroy(event_);
}

void Event::record(cudaStream_t stream) { UOE_CUDA_CHECK("event", cudaEventRecord(event_, stream)); }

void Event::wait(cudaStream_t stream) const { UOE_CUDA_CHECK("event", cudaStreamWaitEvent(stream, event_, 0)); }

void Event::synchronize() const { UOE_CUDA_CHECK("event", cudaEventSynchronize(event_)); }

float Event::elapsed_ms(const Event& start) const {
  float ms = 0.0f;
  UOE_CUDA_CHECK("event", cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

void synchronize(int device, const char* op) {
  DeviceGuard guard(device);
  UOE_CUDA_CHECK(op, cudaDeviceSynchronize());
}

}  // namespace uoe::cuda
