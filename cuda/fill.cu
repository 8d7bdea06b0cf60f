// Fill kernel: writes one bit pattern into every element of a device buffer.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "cuda/cuda_api.h"
#include "cuda/launch.h"

namespace uoe::cuda {
namespace {

template <typename T>
__global__ void fill_kernel(T* dst, size_t n, T value) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = value;
}

template <typename T>
void launch(void* dst, size_t n, unsigned long long bits) {
  const int threads = 256;
  const int blocks = int(std::min<size_t>((n + threads - 1) / threads, 65535));
  // On the library's current stream of the current device, ordered with the rest of its work.
  fill_kernel<T><<<blocks, threads, 0, launch_context("cuda fill").stream>>>(static_cast<T*>(dst), n,
                                                                            static_cast<T>(bits));
  check_launch("cuda fill");
}

}  // namespace

void fill_bytes(void* dst, size_t n, size_t elem_size, unsigned long long value) {
  UOE_CHECK(is_available(), "[fill] no CUDA device is visible");
  if (n == 0) return;
  switch (elem_size) {
    case 1: return launch<uint8_t>(dst, n, value);
    case 2: return launch<uint16_t>(dst, n, value);
    case 4: return launch<uint32_t>(dst, n, value);
    case 8: return launch<uint64_t>(dst, n, value);
    default: fail("[cuda fill] unsupported element size ", elem_size);
  }
}

}  // namespace uoe::cuda
