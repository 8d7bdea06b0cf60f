// A CPU stand-in for the CUDA runtime (tests/cuda_emu), found before any real one on the include path of the
// programs that run CUDA code on the CPU: the thread blocks (cuda_emu/blocks.h), the host API (cuda_emu/host.h) and
// the device functions the kernels of cuda/ use, their math functions as inexact as CUDA's (cuda_emu/libdevice.h).
// Not a CUDA implementation: a way to check, on machines without a GPU, a kernel's indexing and its code paths
// against each other and the math, and the host code around them.
#pragma once
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>

#include "cuda_emu/blocks.h"
#include "cuda_emu/host.h"
#include "cuda_emu/libdevice.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// A block's static shared memory: one variable for all threads; blocks run one after another, so one block's at a time.
#define __shared__ static

struct uint4 {
  unsigned x, y, z, w;
};
struct float2 {
  float x, y;
};

inline void __syncthreads() { uoe::cuda_emu::arrive_and_wait(uoe::cuda_emu::current_block->sync); }
inline void __syncwarp(unsigned = 0xffffffffu) {
  uoe::cuda_emu::arrive_and_wait(uoe::cuda_emu::current_block->warps[uoe::cuda_emu::linear_thread() / 32]);
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
// The emulated program fuses a multiply and the add that uses it into one FMA, as nvcc does by default
// (CMakeLists.txt); the _rn intrinsics are never fused on the GPU, so their operands and products pass through
// `unfused`, which the optimiser cannot see into: a product behind it is rounded, and an add of it is a plain add.
template <class T>
inline T unfused(T x) {
#if defined(__x86_64__)
  asm volatile("" : "+x"(x));
#elif defined(__aarch64__)
  asm volatile("" : "+w"(x));
#else
  volatile T opaque = x;
  x = opaque;
#endif
  return x;
}
inline float __fadd_rn(float a, float b) { return unfused(a) + unfused(b); }
inline float __fsub_rn(float a, float b) { return unfused(a) - unfused(b); }
inline float __fmul_rn(float a, float b) { return unfused(a * b); }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __fsqrt_rn(float a) { return std::sqrt(a); }
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline double __dadd_rn(double a, double b) { return unfused(a) + unfused(b); }
inline double __dmul_rn(double a, double b) { return unfused(a * b); }
inline float __double2float_rn(double x) { return float(x); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned((uint64_t(a) * b) >> 32); }
