// A CPU stand-in for cuda/attention_mma_ptx.cuh (found first on uoe_cuda_emu_tests' include path): the same
// functions, with the PTX ISA's semantics, on the stand-in runtime of tests/cuda_emu/include/cuda_runtime.h.
// - Shared-memory addresses are offsets into the block's dynamic shared memory; every ldmatrix row and cp.async
//   destination is checked against its size and alignment.
// - cp.async copies happen as late as PTX allows: when cp.async.wait_group retires their group, so a read of a tile
//   before its wait sees the old bytes (or the 0xff poison). ThreadSanitizer (scripts/race_check.sh) is told of the
//   copy's accesses at the issue as well, as early as PTX allows.
// - ldmatrix and mma.sync are warp-collective steps: the 32 lanes' registers meet, and each lane computes its part
//   from the fragment layouts (mma: exact bf16 products, summed in double, added to the float accumulator).
// A violated precondition fails the running test (cuda_emu::fault).
#pragma once
#include <cuda_runtime.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "cuda/dynamic_smem.cuh"

namespace uoe::cuda::detail {
namespace {

// A shared address: the offset into the block's dynamic shared memory.
inline uint32_t smem_u32(const void* p) { return uint32_t(static_cast<const unsigned char*>(p) - dynamic_smem()); }

// The shared bytes [addr, addr + bytes), or null (a fault) if they leave the dynamic shared memory or are misaligned.
inline unsigned char* smem_at(uint32_t addr, uint32_t bytes, uint32_t align, const char* what) {
  const size_t size = cuda_emu::current_block->smem_bytes;
  if (size_t(addr) + bytes > size || addr % align != 0) {
    cuda_emu::fault(std::string(what) + ": shared address " + std::to_string(addr) + " (" + std::to_string(bytes) +
                    " bytes, alignment " + std::to_string(align) + ") outside the " + std::to_string(size) +
                    "-byte dynamic shared memory or misaligned");
    return nullptr;
  }
  return dynamic_smem() + addr;
}

struct AsyncCopy {
  uint32_t dst;
  const void* src;
  uint32_t bytes;
  bool valid;
};
// The copies a thread issued that no wait has retired: the open group, and the committed groups, oldest first.
struct AsyncCopies {
  std::vector<AsyncCopy> open;
  std::deque<std::vector<AsyncCopy>> committed;
};
inline AsyncCopies& async_copies() { return cuda_emu::thread_local_state<AsyncCopies>(); }

inline void cp_async(uint32_t dst, const void* src, uint32_t bytes, bool valid) {
  unsigned char* to = smem_at(dst, bytes, bytes, "cp.async");
  if (!to) return;
  // The hardware may copy at any time until the wait: to ThreadSanitizer, the copy reads and writes at the issue too.
  if (valid) cuda_emu::tsan::reads(src, bytes);
  cuda_emu::tsan::writes(to, bytes);
  async_copies().open.push_back({dst, src, bytes, valid});
}
inline void cp_async16(uint32_t dst, const void* src, bool valid) { cp_async(dst, src, 16, valid); }
inline void cp_async4(uint32_t dst, const void* src, bool valid) { cp_async(dst, src, 4, valid); }
inline void cp_async_commit() {
  AsyncCopies& a = async_copies();
  a.committed.push_back(std::exchange(a.open, {}));
}
template <int N>
void cp_async_wait() {
  auto& committed = async_copies().committed;
  while (committed.size() > size_t(N)) {
    for (const AsyncCopy& c : committed.front()) {
      unsigned char* dst = dynamic_smem() + c.dst;
      if (c.valid) std::memcpy(dst, c.src, c.bytes);
      else std::memset(dst, 0, c.bytes);
    }
    committed.pop_front();
  }
}
// The copies this thread issued that no wait has retired (a kernel should end with none).
inline size_t cp_async_pending() {
  const AsyncCopies& a = async_copies();
  size_t n = a.open.size();
  for (const auto& group : a.committed) n += group.size();
  return n;
}

inline uint32_t smem_b16(uint32_t addr) {
  uint16_t v = 0xffff;
  if (const unsigned char* p = smem_at(addr, 2, 2, "ldmatrix")) std::memcpy(&v, p, 2);
  return v;
}
// ldmatrix .x4: lanes 8m..8m+7 give the row addresses (16 aligned bytes each) of 8x8 matrix m; register m of lane l
// receives matrix m's (row l/4, columns 2(l%4), 2(l%4)+1), or with .trans its (rows 2(l%4), 2(l%4)+1, column l/4).
inline void ldsm(uint32_t (&r)[4], uint32_t addr, bool trans) {
  const auto rows = cuda_emu::warp_exchange(addr);
  const unsigned lane = cuda_emu::linear_thread() % 32, g = lane / 4, t = lane % 4;
  for (unsigned m = 0; m < 4; ++m) {
    for (unsigned i = 0; i < 8; ++i) smem_at(rows[8 * m + i], 16, 16, "ldmatrix row");
    r[m] = trans ? smem_b16(rows[8 * m + 2 * t] + 2 * g) | smem_b16(rows[8 * m + 2 * t + 1] + 2 * g) << 16
                 : smem_b16(rows[8 * m + g] + 4 * t) | smem_b16(rows[8 * m + g] + 4 * t + 2) << 16;
  }
}
inline void ldsm_x4(uint32_t (&r)[4], uint32_t addr) { ldsm(r, addr, false); }
inline void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) { ldsm(r, addr, true); }

inline double bf16_half(uint32_t reg, unsigned half) {
  return double(std::bit_cast<float>((reg >> (16 * half) & 0xffffu) << 16));
}
// mma.sync m16n8k16 .row.col bf16 -> f32, c += a b. Lane l = 4g + t holds a: {(g, 2t..), (g+8, 2t..), (g, 2t+8..),
// (g+8, 2t+8..)}, b: {(k 2t.., n g), (k 2t+8.., n g)}, c: {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
inline void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  struct Frag {
    uint32_t a[4], b[2];
  };
  const auto all = cuda_emu::warp_exchange(Frag{{a[0], a[1], a[2], a[3]}, {b0, b1}});
  const unsigned lane = cuda_emu::linear_thread() % 32, g = lane / 4, t = lane % 4;
  for (unsigned e = 0; e < 4; ++e) {
    const unsigned row = g + 8 * (e / 2), col = 2 * t + e % 2;
    double sum = 0;
    for (unsigned k = 0; k < 16; ++k) {
      const double av = bf16_half(all[(row % 8) * 4 + (k % 8) / 2].a[row / 8 + 2 * (k / 8)], k % 2);
      const double bv = bf16_half(all[col * 4 + (k % 8) / 2].b[k / 8], k % 2);
      sum += av * bv;
    }
    c[e] = float(double(c[e]) + sum);
  }
}

}  // namespace
}  // namespace uoe::cuda::detail
