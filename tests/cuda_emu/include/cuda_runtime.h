// A CPU stand-in for the CUDA runtime, for tests/cuda_emu: enough to run simple kernels (no shared memory, no
// __syncthreads) on the CPU. Each thread of a block runs as its own std::thread, so that warp shuffles can meet
// (a barrier per warp of 32); blocks run one after another. Not a CUDA implementation: a way to check, on machines
// without a GPU, that two code paths of a kernel give the same results.
#pragma once
#include <barrier>
#include <cmath>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
inline thread_local uint3 threadIdx, blockIdx, blockDim, gridDim;

namespace uoe::cuda_emu {
struct Block {
  std::vector<std::unique_ptr<std::barrier<>>> warps;  // one barrier per warp
  std::vector<double> lanes;                           // one slot per thread, for shuffles
};
inline Block* current_block = nullptr;

// Runs f() on grid blocks of `block` threads (block a multiple of 32), each thread with its threadIdx, blockIdx,
// blockDim and gridDim set.
template <class F>
void launch(unsigned grid, unsigned block, F&& f) {
  for (unsigned b = 0; b < grid; ++b) {
    Block blk;
    for (unsigned w = 0; w < block / 32; ++w) blk.warps.push_back(std::make_unique<std::barrier<>>(32));
    blk.lanes.assign(block, 0.0);
    current_block = &blk;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, t] {
        threadIdx.x = t, blockIdx.x = b, blockDim.x = block, gridDim.x = grid;
        f();
      });
    for (std::thread& th : threads) th.join();
  }
}
}  // namespace uoe::cuda_emu

// Every lane of the warp takes part (a full mask), as in the kernels emulated here.
template <typename T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  uoe::cuda_emu::Block& blk = *uoe::cuda_emu::current_block;
  const unsigned t = threadIdx.x;
  std::barrier<>& warp = *blk.warps[t / 32];
  blk.lanes[t] = double(v);
  warp.arrive_and_wait();
  const T got = T(blk.lanes[t ^ unsigned(lane_mask)]);
  warp.arrive_and_wait();
  return got;
}
