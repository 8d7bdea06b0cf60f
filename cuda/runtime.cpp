// CUDA runtime: device queries, the device allocator, host/device copies.
#include <cuda_runtime.h>

#include "core/allocator.h"
#include "core/error.h"
#include "cuda/cuda_api.h"

namespace uoe::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  UOE_CHECK(e == cudaSuccess, "[cuda] ", what, " failed: ", cudaGetErrorString(e));
}

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, nbytes);
    if (e != cudaSuccess) {
      cudaGetLastError();
      fail("[cuda allocator] out of memory: requested ", nbytes, " bytes with ", stats_.allocated,
           " bytes in use (", cudaGetErrorString(e), ")");
    }
    stats_.allocated += nbytes;
    stats_.reserved = stats_.allocated;
    if (stats_.allocated > stats_.peak) stats_.peak = stats_.allocated;
    return p;
  }
  void deallocate(void* p, size_t nbytes) override {
    if (!p) return;
    cudaFree(p);
    stats_.allocated -= nbytes;
    stats_.reserved = stats_.allocated;
  }
  AllocatorStats stats() const override { return stats_; }
  void empty_cache() override {}

 private:
  AllocatorStats stats_;
};

// Installs the device allocator when the library loads, if a GPU is visible.
const bool g_registered = [] {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();
    return false;
  }
  register_cuda_allocator(new CudaAllocator());
  return true;
}();

}  // namespace

bool is_available() { return g_registered; }

int device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

void copy_bytes(void* dst, Device dst_device, const void* src, Device src_device, size_t n) {
  UOE_CHECK(is_available(), "[to] no CUDA device is visible");
  if (n == 0) return;
  const cudaMemcpyKind kind = src_device.is_cpu() ? (dst_device.is_cpu() ? cudaMemcpyHostToHost : cudaMemcpyHostToDevice)
                                                  : (dst_device.is_cpu() ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice);
  check(cudaMemcpy(dst, src, n, kind), "cudaMemcpy");
}

}  // namespace uoe::cuda
