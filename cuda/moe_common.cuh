// Host helpers shared by the CUDA MoE kernel files (moe_routing.cu, moe_plan.cu, moe_experts.cu): the
// block size, grid sizing for grid-stride loops, device scratch and zeroing. Private to those files (nvcc only).
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/allocator.h"
#include "core/error.h"
#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

constexpr int kThreads = 256;

// Blocks for a grid-stride loop over `work` items (at least 1; the loops cover whatever the grid does not).
unsigned blocks_for(int64_t work, int threads = kThreads) {
  return unsigned(std::clamp<int64_t>((work + threads - 1) / threads, 1, int64_t(1) << 20));
}

template <typename T>
DeviceBuffer buffer(const LaunchContext& c, int64_t elems) {
  return DeviceBuffer(c.device, size_t(std::max<int64_t>(elems, 0)) * sizeof(T));
}

template <typename T>
void zero(const LaunchContext& c, T* p, int64_t elems, const char* op) {
  if (p && elems > 0) UOE_CUDA_CHECK(op, cudaMemsetAsync(p, 0, size_t(elems) * sizeof(T), c.stream));
}

}  // namespace

}  // namespace uoe::cuda
