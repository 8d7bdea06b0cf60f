// Without the caching allocator (UOE_CUDA_NO_CACHING=1: ctest's CudaNoCaching entry), a tensor's memory ends where
// the emulated device memory becomes inaccessible, so a kernel that reads past a tensor faults; inside a cached
// segment the same read would return its neighbour's bytes and go unnoticed. This is what lets that entry run the
// parity test of every op as a bounds check of its kernels.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>

#include "cuda/caching_allocator.h"

namespace uoe {
namespace {

__global__ void read_kernel(const float* p, int64_t i, float* out) { *out = p[i]; }

TEST(CudaAllocatorEmulated, WithoutCachingAKernelReadPastATensorFaults) {
  if (cuda::caching()) GTEST_SKIP() << "runs with UOE_CUDA_NO_CACHING=1 (ctest: CudaNoCaching)";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  Allocator& a = cuda::caching_allocator();
  auto* p = static_cast<float*>(cuda::allocate_on(0, 1000 * sizeof(float)));  // 4000 bytes: 96 of padding
  auto* out = static_cast<float*>(cuda::allocate_on(0, sizeof(float)));
  const auto read = [&](int64_t i) {
    cuda_emu::launch_kernel([](auto&&... x) { read_kernel(x...); }, 1, 1)(p, i, out);
    return cudaDeviceSynchronize();
  };
  EXPECT_EQ(read(999), cudaSuccess);
  EXPECT_DEATH(read(1024), "");  // the first float past the 256-byte rounding
  a.deallocate(out, sizeof(float));
  a.deallocate(p, 1000 * sizeof(float));
}

}  // namespace
}  // namespace uoe
