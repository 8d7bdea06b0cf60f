// A CPU stand-in for the CUDA runtime, for tests/cuda_emu: enough to run the kernels it names on the CPU. Each thread
// of a block runs as its own std::thread, so that warp-collective steps (shuffles, and the ldmatrix and mma.sync of
// tests/cuda_emu/include/cuda/attention_mma_ptx.cuh) can meet: a barrier per warp of 32, and one per block for
// __syncthreads. Blocks run one after another, each with its own dynamic shared memory, filled with 0xff bytes (NaN
// as float or bfloat16) so that a read of shared memory nothing wrote shows, and followed by a guard as large again
// (at least 4 KiB) whose change fails the running test. Not a CUDA implementation: a way to check, on machines
// without a GPU, a kernel's indexing and its code paths against each other and the math.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// A block's static shared memory: one variable for all threads; blocks run one after another, so one block's at a time.
#define __shared__ static

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
};
struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};
inline thread_local uint3 threadIdx, blockIdx, blockDim, gridDim;

namespace uoe::cuda_emu {

// The thread's index in its block, x fastest: warps are 32 consecutive ones.
inline unsigned linear_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }

constexpr size_t kSlotBytes = 64;  // what one lane can publish in a warp-collective step
constexpr unsigned char kGuardByte = 0xa5;

// A violated precondition the emulation found (a shared address out of range, a write past the shared memory): a
// failure of the running test, from whichever thread found it (GoogleTest's assertions are thread-safe).
inline void fault(const std::string& what) { ADD_FAILURE() << "CUDA emulation: " << what; }

struct SmemFree {
  void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(128)); }
};

struct Block {
  using Slot = std::array<unsigned char, kSlotBytes>;
  explicit Block(unsigned threads, size_t smem_bytes)
      : sync(threads), slots{std::vector<Slot>(threads), std::vector<Slot>(threads)}, smem_bytes(smem_bytes),
        guard_bytes(std::max<size_t>(smem_bytes, 4096)),
        smem(static_cast<unsigned char*>(::operator new[](smem_bytes + guard_bytes, std::align_val_t(128)))) {
    for (unsigned w = 0; w < threads / 32; ++w) warps.push_back(std::make_unique<std::barrier<>>(32));
    std::memset(smem.get(), 0xff, smem_bytes);
    std::memset(smem.get() + smem_bytes, kGuardByte, guard_bytes);
  }
  bool guard_intact() const {
    for (size_t i = 0; i < guard_bytes; ++i)
      if (smem[smem_bytes + i] != kGuardByte) return false;
    return true;
  }
  std::vector<std::unique_ptr<std::barrier<>>> warps;  // one barrier per warp
  std::barrier<> sync;                                 // __syncthreads
  std::vector<Slot> slots[2];                          // two sets of one per thread, for warp-collective steps
  size_t smem_bytes;
  size_t guard_bytes;                               // as many again (at least 4 KiB), after it
  std::unique_ptr<unsigned char[], SmemFree> smem;  // the dynamic shared memory, then the guard
};
inline Block* current_block = nullptr;

// Runs f() on grid blocks (one-dimensional) of `block` threads (a multiple of 32 in all), each thread with its
// threadIdx, blockIdx, blockDim and gridDim set, each block with smem_bytes of dynamic shared memory.
template <class F>
void launch(unsigned grid, dim3 block, F&& f, size_t smem_bytes = 0) {
  const unsigned size = block.x * block.y * block.z;
  for (unsigned b = 0; b < grid; ++b) {
    Block blk(size, smem_bytes);
    current_block = &blk;
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < size; ++t)
      threads.emplace_back([&, t] {
        threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
        blockIdx = {b, 0, 0}, blockDim = {block.x, block.y, block.z}, gridDim = {grid, 1, 1};
        f();
      });
    for (std::thread& th : threads) th.join();
    if (!blk.guard_intact())
      fault("block " + std::to_string(b) + " wrote past its " + std::to_string(smem_bytes) +
            " bytes of dynamic shared memory");
  }
  current_block = nullptr;
}

// A warp-collective step: every lane of the calling thread's warp publishes `mine` and receives all 32 lanes' values
// (lane order). Every lane of the warp must call it, as with a full-mask shuffle. One barrier per step: steps
// alternate between two sets of slots, and a lane can only write a set again after every lane has passed the barrier
// of the step between, that is, has read the set.
inline thread_local unsigned t_warp_steps = 0;
template <class T>
std::array<T, 32> warp_exchange(const T& mine) {
  static_assert(sizeof(T) <= kSlotBytes && std::is_trivially_copyable_v<T>);
  Block& blk = *current_block;
  const unsigned t = linear_thread(), first = t / 32 * 32, set = t_warp_steps++ % 2;
  auto& slots = blk.slots[set];
  std::memcpy(slots[t].data(), &mine, sizeof(T));
  blk.warps[t / 32]->arrive_and_wait();
  std::array<T, 32> all;
  for (unsigned l = 0; l < 32; ++l) std::memcpy(&all[l], slots[first + l].data(), sizeof(T));
  return all;
}

}  // namespace uoe::cuda_emu

inline void __syncthreads() { uoe::cuda_emu::current_block->sync.arrive_and_wait(); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  uoe::cuda_emu::current_block->warps[uoe::cuda_emu::linear_thread() / 32]->arrive_and_wait();
}

// Every lane of the warp takes part (a full mask), as in the kernels emulated here.
template <typename T>
T __shfl_xor_sync(unsigned, T v, int lane_mask) {
  return uoe::cuda_emu::warp_exchange(v)[(uoe::cuda_emu::linear_thread() % 32) ^ unsigned(lane_mask)];
}

// Lane l gets lane l + delta's value (its own when that is past the warp).
template <typename T>
T __shfl_down_sync(unsigned, T v, unsigned delta) {
  const unsigned lane = uoe::cuda_emu::linear_thread() % 32;
  const auto all = uoe::cuda_emu::warp_exchange(v);
  return lane + delta < 32 ? all[lane + delta] : v;
}
// Every lane gets lane src's value.
template <typename T>
T __shfl_sync(unsigned, T v, int src) {
  return uoe::cuda_emu::warp_exchange(v)[unsigned(src) % 32];
}

// The bits of the warp's lanes whose predicate holds (every lane takes part).
inline unsigned __ballot_sync(unsigned, bool predicate) {
  const auto all = uoe::cuda_emu::warp_exchange(predicate);
  unsigned bits = 0;
  for (unsigned l = 0; l < 32; ++l) bits |= unsigned(all[l]) << l;
  return bits;
}
inline int __popc(unsigned x) { return std::popcount(x); }

// Atomics on global or shared memory: the old value, as CUDA's.
template <class T>
T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}
template <class T>
T atomicMin(T* p, T v) {
  std::atomic_ref<T> a(*p);
  T old = a.load();
  while (v < old && !a.compare_exchange_weak(old, v)) {
  }
  return old;
}

using std::isnan;
using std::max;
using std::min;
// Round-to-nearest arithmetic, never fused (uoe_cuda_emu_tests is built with -ffp-contract=off).
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
