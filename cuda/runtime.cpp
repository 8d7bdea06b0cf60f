// CUDA runtime: device queries, registration of the caching device allocator and the device switch, host/device
// copies.
#include <cuda_runtime.h>

#include <cstring>

#include "core/allocator.h"
#include "core/device_scope.h"
#include "core/error.h"
#include "core/communicator.h"
#include "core/device_copy.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/cuda_api.h"
#include "cuda/nccl_communicator.h"
#include "cuda/stream.h"
#include "ops/kernels/copy.h"

namespace uoe::cuda {
namespace {

// Installs what core reaches devices through when the library loads, if a GPU is visible: the caching device
// allocator, the device switch (core/device_scope.h), the device copy (core/device_copy.h) and, built with NCCL,
// world()'s communicator for CUDA tensors (core/communicator.h).
const bool g_registered = [] {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    (void)cudaGetLastError();
    return false;
  }
  register_cuda_allocator(&caching_allocator());
  register_cuda_device_switch({enter_device, leave_device});
  register_cuda_copy(copy_bytes);
#if UOE_WITH_NCCL
  register_gpu_communicator(make_nccl_communicator);
#endif
  return true;
}();

}  // namespace

bool is_available() { return g_registered; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return n;
}

void set_device(int device) {
  const int n = device_count();
  UOE_CHECK(device >= 0 && device < n, "[set_device] cuda:", device, " does not exist (", n, " GPU(s) visible)");
  UOE_CUDA_CHECK("set_device", cudaSetDevice(device));
}

// The copy runs on the current stream of the GPU involved (the destination's when both are GPUs) and is
// waited for, so the call is synchronous: host memory may be reused and device data read at once.
void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  UOE_CHECK(is_available(), "[to] no CUDA device is visible");
  if (n == 0) return;
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    std::memcpy(dst, src, n);
    return;
  }
  if (src_device.is_cuda() && dst_device.is_cuda() && src_device.index != dst_device.index) {
    // Work queued on the source GPU must finish before the destination GPU's stream reads its data.
    DeviceGuard guard(src_device.index);
    UOE_CUDA_CHECK("to", cudaStreamSynchronize(current_stream(src_device.index)));
  }
  const int device = dst_device.is_cuda() ? dst_device.index : src_device.index;
  DeviceGuard guard(device);
  const cudaStream_t stream = current_stream(device);
  UOE_CUDA_CHECK("to", cudaMemcpyAsync(dst, src, n, cudaMemcpyDefault, stream));
  UOE_CUDA_CHECK("to", cudaStreamSynchronize(stream));
}

}  // namespace uoe::cuda
