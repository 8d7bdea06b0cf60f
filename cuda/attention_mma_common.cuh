// Shared pieces of the tensor-core bf16 attention (cuda/attention_mma_forward.cu, attention_mma_backward.cu): PTX
// wrappers (cp.async, ldmatrix, mma.sync m16n8k16), fragment packing and addressing, the tile loader, the kernel
// arguments and tile sizes, and the host launch helpers. Private to those two files (compiled by nvcc only).
#pragma once
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "core/error.h"
#include "cuda/attention_mma.h"
#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/stream.h"

namespace uoe::cuda::detail {
namespace {

constexpr int kThreads = 128;  // 4 warps; each warp owns 16 rows (queries, or keys in the dk/dv pass)
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// ---- PTX wrappers -------------------------------------------------------------------------------------------
__device__ __forceinline__ uint32_t smem_u32(const void* p) { return uint32_t(__cvta_generic_to_shared(p)); }

// 16 bytes global -> shared, asynchronously; valid == false writes 16 zero bytes (src is not read).
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
// 4 bytes global -> shared, asynchronously (through L1); valid == false writes 4 zero bytes (src is not read).
__device__ __forceinline__ void cp_async4(uint32_t dst, const void* src, bool valid) {
  const int n = valid ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src), "r"(n) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

// Four 8x8 b16 matrices; lanes 8m..8m+7 give the row addresses of matrix m, register m receives it.
__device__ __forceinline__ void ldsm_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}
__device__ __forceinline__ void ldsm_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr)
               : "memory");
}

// c += a b: a 16x16 (row), b 16x8 (col), c 16x8 float. Fragment layouts (g = lane / 4, t = lane % 4):
// a: {(g, 2t..), (g+8, 2t..), (g, 2t+8..), (g+8, 2t+8..)}; b: {(k 2t.., n g), (k 2t+8.., n g)};
// c: {(g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1)}.
__device__ __forceinline__ void mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

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

// ---- host side ------------------------------------------------------------------------------------------------

template <typename Kernel>
void launch(Kernel kernel, int64_t blocks, size_t smem, const LaunchContext& c, const char* op, const MmaArgs& a) {
  UOE_CHECK(blocks < (int64_t(1) << 31), "[", op, "] too many thread blocks (", blocks, ")");
  UOE_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<unsigned(blocks), kThreads, smem, c.stream>>>(a);
  check_launch(op);
}

// Calls f(IntC<DH>) for the head dim s.Dh (detail::mma_head_dim).
template <class F>
void with_head_dim(const AttnShape& s, const char* op, F&& f) {
  switch (s.Dh) {
    case 64: return f(std::integral_constant<int, 64>{});
    case 96: return f(std::integral_constant<int, 96>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: fail("[", op, "] tensor-core path needs head dim 64, 96 or 128, got ", s.Dh);
  }
}

MmaArgs make_args(const AttnShape& s, const char* op) {
  UOE_CHECK(s.T < (int64_t(1) << 30), "[", op, "] sequence length ", s.T, " is too long for the tensor-core kernels");
  MmaArgs a{};
  a.B = s.B, a.H = s.H, a.Hkv = s.Hkv, a.T = s.T, a.G = s.H / s.Hkv;
  a.nqb = (s.T + kBQ - 1) / kBQ, a.nkb = (s.T + kBK - 1) / kBK;
  a.scale = float(s.scale), a.scale_log2 = float(s.scale * 1.4426950408889634);
  a.causal = s.causal;
  a.tiles_inner = attention_tiles_inner();
  return a;
}

}  // namespace
}  // namespace uoe::cuda::detail
