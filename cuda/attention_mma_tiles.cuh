// The device side of the tensor-core bf16 attention kernels (cuda/attention_mma_forward.cuh,
// attention_mma_backward.cuh): tile sizes, fragment packing and addressing, the tile loader, the task order and the
// kernel arguments. No host code: uoe_cuda_emu_tests compiles it against a stand-in CUDA runtime.
#pragma once
#include <cuda_bf16.h>

#include <cmath>
#include <cstdint>

#include "cuda/attention_mma.h"
#include "cuda/attention_mma_ptx.cuh"
#include "cuda/dynamic_smem.cuh"

namespace uoe::cuda::detail {
namespace {

constexpr int kThreads = 128;  // 4 warps; each warp owns 16 rows (queries, or keys in the dk/dv pass)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// Two floats -> packed bf16x2 (lo in the low half: the smaller column index of a fragment pair).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// The A fragment of a 16x16 block built from two 16x8 accumulator tiles (columns 0-7 and 8-15).
__device__ __forceinline__ void acc_to_a(uint32_t (&a)[4], const float (&lo)[4], const float (&hi)[4]) {
  a[0] = pack_bf16(lo[0], lo[1]);
  a[1] = pack_bf16(lo[2], lo[3]);
  a[2] = pack_bf16(hi[0], hi[1]);
  a[3] = pack_bf16(hi[2], hi[3]);
}

// Addresses (in elements, rows `lds` apart) of the ldmatrix row a lane supplies:
// A operand, 16x16 block at (r0, c0) of a row-major tile.
__device__ __forceinline__ int a_off(int lane, int r0, int c0, int lds) {
  return (r0 + (lane & 15)) * lds + c0 + (lane >> 4) * 8;
}
// B operand (two n-tiles of 8) from a tile stored [n][k] (B^T row-major, e.g. K rows for Q K^T): x4 gives
// {b0, b1} of n-tile n0 and {b0, b1} of n-tile n0 + 8.
__device__ __forceinline__ int bt_off(int lane, int n0, int k0, int lds) {
  return (n0 + (lane & 7) + ((lane >> 4) << 3)) * lds + k0 + ((lane >> 3) & 1) * 8;
}
// B operand from a tile stored [k][n] (e.g. V rows for P V), loaded with .trans: same register order.
__device__ __forceinline__ int b_off(int lane, int k0, int n0, int lds) {
  return (k0 + (lane & 7) + ((lane >> 3) & 1) * 8) * lds + n0 + (lane >> 4) * 8;
}

// rows x DH bf16 tile rows r0.. of a [T, DH] operand (rows `stride` elements apart) into shared memory
// (rows lds apart); rows >= T are zero-filled.
template <int DH>
__device__ __forceinline__ void load_tile_async(uint16_t* dst, int lds, const uint16_t* base, int64_t stride,
                                                int64_t r0, int rows, int64_t T) {
  constexpr int kChunks = DH / 8;  // 16-byte chunks per row
  for (int c = threadIdx.x; c < rows * kChunks; c += kThreads) {
    const int r = c / kChunks, cc = c % kChunks;
    const bool ok = r0 + r < T;
    const uint16_t* src = base + (ok ? (r0 + r) * stride + cc * 8 : 0);
    cp_async16(smem_u32(dst + r * lds + cc * 8), src, ok);
  }
}

__device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// The task of this block among heads x tiles: its head in [0, heads) and the rank of its tile in [0, tiles), rank 0
// the heaviest; tiles inner (consecutive blocks: one head's tiles) or heads inner (consecutive blocks: one tile rank
// of every head).
struct Task {
  int64_t head, rank;
};
__device__ __forceinline__ Task block_task(int64_t heads, int64_t tiles, bool tiles_inner) {
  const int64_t task = blockIdx.x;
  return tiles_inner ? Task{task / tiles, task % tiles} : Task{task % heads, task / heads};
}

struct MmaArgs {
  int64_t B, H, Hkv, T, G, nqb, nkb;
  float scale, scale_log2;  // scale, scale * log2(e)
  bool causal;
  bool tiles_inner;  // the task order (attention_tiles_inner)
  const uint16_t *q, *k, *v, *dout;
  AttnStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  uint16_t *out, *dq, *dk, *dv;
  float* lse_out;
  const float *lse_in, *dsum;
};

constexpr int kBQ = 64, kBK = 64, kQC = 32;  // query tile, key tile, query chunk of the dk/dv pass

// The shape's part of the kernel arguments (T < 2^30, checked by the launcher); pointers and strides left null.
inline MmaArgs shape_args(const AttnShape& s, bool tiles_inner) {
  MmaArgs a{};
  a.B = s.B, a.H = s.H, a.Hkv = s.Hkv, a.T = s.T, a.G = s.H / s.Hkv;
  a.nqb = (s.T + kBQ - 1) / kBQ, a.nkb = (s.T + kBK - 1) / kBK;
  a.scale = float(s.scale), a.scale_log2 = float(s.scale * 1.4426950408889634);
  a.causal = s.causal;
  a.tiles_inner = tiles_inner;
  return a;
}

}  // namespace
}  // namespace uoe::cuda::detail
