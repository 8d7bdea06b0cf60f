// Deterministic sum of n doubles on the device: one block of `Threads` threads (a power of two), fixed
// per-thread strides and a fixed tree, so that repeated runs give identical bits. Launch with <<<1, Threads>>>.
#pragma once
#include <cstdint>

namespace uoe::cuda {

template <int Threads>
__global__ void sum_doubles_kernel(const double* v, int64_t n, double* out) {
  __shared__ double part[Threads];
  double acc = 0;
  for (int64_t i = threadIdx.x; i < n; i += Threads) acc += v[i];
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int w = Threads / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) part[threadIdx.x] += part[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = part[0];
}

}  // namespace uoe::cuda
