// uoe::cuda bf16 attention on tensor cores: FlashAttention-2 forward and backward with mma.sync m16n8k16 (bf16
// operands, float32 accumulation), head dims 64, 96 and 128, cp.async double-buffered tiles, ldmatrix fragments.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>

#include "core/error.h"
#include "cuda/attention_kernels.h"
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

struct MmaArgs {
  int64_t B, H, Hkv, T, G, nqb, nkb;
  float scale, scale_log2;  // scale, scale * log2(e)
  bool causal;
  const uint16_t *q, *k, *v, *dout;
  AttnStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  uint16_t *out, *dq, *dk, *dv;
  float* lse_out;
  const float *lse_in, *dsum;
};

constexpr int kBQ = 64, kBK = 64, kQC = 32;  // query tile, key tile, query chunk of the dk/dv pass

template <int DH, int MT>
constexpr size_t fwd_smem() {
  return size_t(kBQ * MT + 4 * kBK) * (DH + 8) * 2;
}
template <int DH>
constexpr size_t kv_smem() {
  return size_t(2 * kBK + 4 * kQC) * (DH + 8) * 2 + 4 * kQC * sizeof(float);
}
template <int DH>
constexpr size_t q_smem() {
  return size_t(2 * kBQ + 4 * kBK) * (DH + 8) * 2;
}

// ---- forward: one block per (b, h, tile of 64·MT queries); K/V tiles of 64 keys double-buffered ---------------
// Warp w owns rows 64·mt + 16·w of each m-tile mt < MT. With MT = 2 (FlashAttention-2's 128-query tiles) every K
// and V fragment read from shared memory feeds two MMAs instead of one, halving the shared-memory traffic per FLOP;
// Q fragments then come from shared memory at each k-step (MT = 1 keeps them all in registers). Under causal
// masking an m-tile whose rows all precede a key tile skips it.
template <int DH, int MT>
__global__ void __launch_bounds__(kThreads) attn_fwd_mma_kernel(const MmaArgs a) {
  constexpr int LDS = DH + 8, BQ = kBQ * MT;  // padded row: ldmatrix rows land on distinct banks
  extern __shared__ __align__(128) unsigned char smem_raw[];
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem_raw);  // [BQ][LDS]
  uint16_t* Ks = Qs + BQ * LDS;                          // [2][kBK][LDS]
  uint16_t* Vs = Ks + 2 * kBK * LDS;                     // [2][kBK][LDS]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3, w0 = warp * 16;
  const int64_t nqb = (a.T + BQ - 1) / BQ, BH = a.B * a.H, task = blockIdx.x, qb = nqb - 1 - task / BH;
  const int64_t bh = task % BH, b = bh / a.H, h = bh % a.H, hk = h / a.G, i0 = qb * BQ;
  const uint16_t* qp = a.q + b * a.qs.batch + h * a.qs.head;
  const uint16_t* kp = a.k + b * a.ks.batch + hk * a.ks.head;
  const uint16_t* vp = a.v + b * a.vs.batch + hk * a.vs.head;
  // key tiles up to the one holding the tile's last query under causal masking
  const int64_t nk = a.causal ? min64(a.nkb, (i0 + BQ - 1) / kBK + 1) : a.nkb;

  load_tile_async<DH>(Qs, LDS, qp, a.qs.time, i0, BQ, a.T);
  load_tile_async<DH>(Ks, LDS, kp, a.ks.time, 0, kBK, a.T);
  load_tile_async<DH>(Vs, LDS, vp, a.vs.time, 0, kBK, a.T);
  cp_async_commit();

  uint32_t qf[MT == 1 ? DH / 16 : 1][4];  // MT = 1: every Q fragment of the warp's rows, loaded once
  float o[MT][DH / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DH / 8; ++dt) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.0f;
  float m[MT][2], l[MT][2];  // rows g and g + 8 of each m-tile (log2 domain); l per thread
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

  for (int64_t kb = 0; kb < nk; ++kb) {
    const int cur = int(kb & 1);
    if (kb + 1 < nk) {
      load_tile_async<DH>(Ks + (cur ^ 1) * kBK * LDS, LDS, kp, a.ks.time, (kb + 1) * kBK, kBK, a.T);
      load_tile_async<DH>(Vs + (cur ^ 1) * kBK * LDS, LDS, vp, a.vs.time, (kb + 1) * kBK, kBK, a.T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    if constexpr (MT == 1) {
      if (kb == 0) {
#pragma unroll
        for (int kk = 0; kk < DH / 16; ++kk) ldsm_x4(qf[kk], smem_u32(Qs + a_off(lane, w0, kk * 16, LDS)));
      }
    }
    const uint16_t* Kc = Ks + cur * kBK * LDS;
    const uint16_t* Vc = Vs + cur * kBK * LDS;
    const int64_t j0 = kb * kBK;
    bool live[MT];  // (warp-uniform) some row of the warp's m-tile sees some key of this tile
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) live[mt] = !(a.causal && j0 > i0 + mt * kBQ + w0 + 15);
    // S = Q K^T: 16 x 64 per warp and m-tile
    float s[MT][8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DH / 16; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (MT == 1) {
          qa[mt][0] = qf[kk][0], qa[mt][1] = qf[kk][1], qa[mt][2] = qf[kk][2], qa[mt][3] = qf[kk][3];
        } else {
          ldsm_x4(qa[mt], smem_u32(Qs + a_off(lane, mt * kBQ + w0, kk * 16, LDS)));
        }
      }
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bf[4];
        ldsm_x4(bf, smem_u32(Kc + bt_off(lane, np * 16, kk * 16, LDS)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (!live[mt]) continue;
          mma(s[mt][2 * np], qa[mt], bf[0], bf[1]);
          mma(s[mt][2 * np + 1], qa[mt], bf[2], bf[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (!live[mt]) continue;
      const int64_t r0 = i0 + mt * kBQ + w0;  // the m-tile's first row for this warp
      // scale into the log2 domain; mask keys past T and, under causal, keys after the query
      const bool need_mask = j0 + kBK > a.T || (a.causal && j0 + kBK - 1 > r0);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[mt][nt][e] * a.scale_log2;
          if (need_mask) {  // T < 2^31 (checked on the host)
            const int j = int(j0) + nt * 8 + 2 * tq + (e & 1), i = int(r0) + g + 8 * (e >> 1);
            if (j >= int(a.T) || (a.causal && j > i)) x = -INFINITY;
          }
          s[mt][nt][e] = x;
        }
      }
      // online softmax per row: m' = max(m, max s), p = 2^(s - m'), l' = 2^(m - m') l + sum p
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = m[mt][r];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float ms = mx == -INFINITY ? 0.0f : mx;
        const float alpha = exp2f(m[mt][r] - ms);
        m[mt][r] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          s[mt][nt][2 * r] = exp2f(s[mt][nt][2 * r] - ms);
          s[mt][nt][2 * r + 1] = exp2f(s[mt][nt][2 * r + 1] - ms);
          sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
        }
        l[mt][r] = l[mt][r] * alpha + sum;
#pragma unroll
        for (int dt = 0; dt < DH / 8; ++dt) o[mt][dt][2 * r] *= alpha, o[mt][dt][2 * r + 1] *= alpha;
      }
    }
    // O += P V (P rounded to bf16 as the A operand)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) acc_to_a(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < DH / 16; ++dp) {
        uint32_t bf[4];
        ldsm_x4_trans(bf, smem_u32(Vc + b_off(lane, kk * 16, dp * 16, LDS)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (!live[mt]) continue;
          mma(o[mt][2 * dp], pa[mt], bf[0], bf[1]);
          mma(o[mt][2 * dp + 1], pa[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled two tiles on
  }
  // out = O / l, lse = ln(2^m l) = m ln 2 + ln l
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
      const int64_t i = i0 + mt * kBQ + w0 + g + 8 * r;
      if (i >= a.T) continue;
      const float inv = 1.0f / l[mt][r];
      uint16_t* orow = a.out + b * a.os.batch + h * a.os.head + i * a.os.time;
#pragma unroll
      for (int dt = 0; dt < DH / 8; ++dt)
        *reinterpret_cast<uint32_t*>(orow + dt * 8 + 2 * tq) =
            pack_bf16(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
      if (tq == 0) a.lse_out[bh * a.T + i] = m[mt][r] * kLn2 + logf(l[mt][r]);
    }
  }
}

// ---- backward, dk/dv: one block per (b, kv head, 64-key tile); each warp 16 keys. Loops over the group's q heads
// and 32-query chunks (from the diagonal under causal), Q/dO chunks double-buffered; dK, dV in registers. ------------
template <int DH>
__global__ void __launch_bounds__(kThreads) attn_bwd_kv_mma_kernel(const MmaArgs a) {
  constexpr int LDS = DH + 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  uint16_t* Ks = reinterpret_cast<uint16_t*>(smem_raw);  // [kBK][LDS]
  uint16_t* Vs = Ks + kBK * LDS;                         // [kBK][LDS]
  uint16_t* Qs = Vs + kBK * LDS;                         // [2][kQC][LDS]
  uint16_t* dOs = Qs + 2 * kQC * LDS;                    // [2][kQC][LDS]
  float* Ls = reinterpret_cast<float*>(dOs + 2 * kQC * LDS);  // [2][kQC] lse * log2(e)
  float* Ds = Ls + 2 * kQC;                                   // [2][kQC] rowsum(dO ⊙ O)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3, w0 = warp * 16;
  const int64_t BHk = a.B * a.Hkv, task = blockIdx.x, bh = task % BHk, kb = task / BHk;
  const int64_t b = bh / a.Hkv, hk = bh % a.Hkv, j0 = kb * kBK;
  const int64_t nqc = (a.T + kQC - 1) / kQC, qc0 = a.causal ? j0 / kQC : 0, per_head = nqc - qc0;
  const int64_t total = a.G * per_head;

  // Issues the loads of chunk `it` (q head hk*G + it / per_head, chunk qc0 + it % per_head) into buffer buf.
  auto load_chunk = [&](int64_t it, int buf) {
    const int64_t h = hk * a.G + it / per_head, i0 = (qc0 + it % per_head) * kQC;
    load_tile_async<DH>(Qs + buf * kQC * LDS, LDS, a.q + b * a.qs.batch + h * a.qs.head, a.qs.time, i0, kQC, a.T);
    load_tile_async<DH>(dOs + buf * kQC * LDS, LDS, a.dout + b * a.dos.batch + h * a.dos.head, a.dos.time, i0, kQC,
                        a.T);
    for (int i = threadIdx.x; i < kQC; i += kThreads) {
      const bool ok = i0 + i < a.T;
      const int64_t r = (b * a.H + h) * a.T + i0 + i;
      Ls[buf * kQC + i] = ok ? a.lse_in[r] * kLog2e : 0.0f;
      Ds[buf * kQC + i] = ok ? a.dsum[r] : 0.0f;
    }
  };
  load_tile_async<DH>(Ks, LDS, a.k + b * a.ks.batch + hk * a.ks.head, a.ks.time, j0, kBK, a.T);
  load_tile_async<DH>(Vs, LDS, a.v + b * a.vs.batch + hk * a.vs.head, a.vs.time, j0, kBK, a.T);
  if (total > 0) load_chunk(0, 0);
  cp_async_commit();

  float dk[DH / 8][4], dv[DH / 8][4];
#pragma unroll
  for (int dt = 0; dt < DH / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.0f;

  for (int64_t it = 0; it < total; ++it) {
    const int cur = int(it & 1);
    if (it + 1 < total) {
      load_chunk(it + 1, cur ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint16_t* Qc = Qs + cur * kQC * LDS;
    const uint16_t* dOc = dOs + cur * kQC * LDS;
    const float* Lc = Ls + cur * kQC;
    const float* Dc = Ds + cur * kQC;
    const int64_t i0 = (qc0 + it % per_head) * kQC;
    // S^T = K Q^T and dP^T = V dO^T: 16 keys x 32 queries per warp
    float st[4][4], dpt[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DH / 16; ++kk) {
      uint32_t ka[4], va[4];
      ldsm_x4(ka, smem_u32(Ks + a_off(lane, w0, kk * 16, LDS)));
      ldsm_x4(va, smem_u32(Vs + a_off(lane, w0, kk * 16, LDS)));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t bq[4], bo[4];
        ldsm_x4(bq, smem_u32(Qc + bt_off(lane, np * 16, kk * 16, LDS)));
        ldsm_x4(bo, smem_u32(dOc + bt_off(lane, np * 16, kk * 16, LDS)));
        mma(st[2 * np], ka, bq[0], bq[1]);
        mma(st[2 * np + 1], ka, bq[2], bq[3]);
        mma(dpt[2 * np], va, bo[0], bo[1]);
        mma(dpt[2 * np + 1], va, bo[2], bo[3]);
      }
    }
    // P^T = 2^(scale log2e s - lse log2e), dS^T = P^T (dP^T - D); 0 where masked
    const int Ti = int(a.T), ib = int(i0), jb = int(j0) + w0 + g;  // T < 2^31 (checked on the host)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int il = nt * 8 + 2 * tq + (e & 1), j = jb + 8 * (e >> 1), i = ib + il;
        const bool ok = i < Ti && j < Ti && (!a.causal || j <= i);
        const float p = ok ? exp2f(st[nt][e] * a.scale_log2 - Lc[il]) : 0.0f;
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - Dc[il]);
      }
    }
    // dV += P^T dO, then dK += dS^T Q: 2 k-steps of 16 queries each (separate loops: shorter live ranges)
#pragma unroll
    for (int kq = 0; kq < 2; ++kq) {
      uint32_t pa[4];
      acc_to_a(pa, st[2 * kq], st[2 * kq + 1]);
#pragma unroll
      for (int dp = 0; dp < DH / 16; ++dp) {
        uint32_t bo[4];
        ldsm_x4_trans(bo, smem_u32(dOc + b_off(lane, kq * 16, dp * 16, LDS)));
        mma(dv[2 * dp], pa, bo[0], bo[1]);
        mma(dv[2 * dp + 1], pa, bo[2], bo[3]);
      }
    }
#pragma unroll
    for (int kq = 0; kq < 2; ++kq) {
      uint32_t sa[4];
      acc_to_a(sa, dpt[2 * kq], dpt[2 * kq + 1]);
#pragma unroll
      for (int dp = 0; dp < DH / 16; ++dp) {
        uint32_t bq[4];
        ldsm_x4_trans(bq, smem_u32(Qc + b_off(lane, kq * 16, dp * 16, LDS)));
        mma(dk[2 * dp], sa, bq[0], bq[1]);
        mma(dk[2 * dp + 1], sa, bq[2], bq[3]);
      }
    }
    __syncthreads();
  }
  // dk = scale dK, dv = dV (zero where no query sees the key)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t j = j0 + w0 + g + 8 * r;
    if (j >= a.T) continue;
    uint16_t* krow = a.dk + b * a.dks.batch + hk * a.dks.head + j * a.dks.time;
    uint16_t* vrow = a.dv + b * a.dvs.batch + hk * a.dvs.head + j * a.dvs.time;
#pragma unroll
    for (int dt = 0; dt < DH / 8; ++dt) {
      *reinterpret_cast<uint32_t*>(krow + dt * 8 + 2 * tq) =
          pack_bf16(dk[dt][2 * r] * a.scale, dk[dt][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(vrow + dt * 8 + 2 * tq) = pack_bf16(dv[dt][2 * r], dv[dt][2 * r + 1]);
    }
  }
}

// ---- backward, dq: one block per (b, h, 64-query tile); each warp 16 queries; K/V tiles double-buffered --------
template <int DH>
__global__ void __launch_bounds__(kThreads) attn_bwd_q_mma_kernel(const MmaArgs a) {
  constexpr int LDS = DH + 8;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  uint16_t* Qs = reinterpret_cast<uint16_t*>(smem_raw);  // [kBQ][LDS]
  uint16_t* dOs = Qs + kBQ * LDS;                        // [kBQ][LDS]
  uint16_t* Ks = dOs + kBQ * LDS;                        // [2][kBK][LDS]
  uint16_t* Vs = Ks + 2 * kBK * LDS;                     // [2][kBK][LDS]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3, w0 = warp * 16;
  const int64_t BH = a.B * a.H, task = blockIdx.x, qb = a.nqb - 1 - task / BH, bh = task % BH;
  const int64_t b = bh / a.H, h = bh % a.H, hk = h / a.G, i0 = qb * kBQ;
  const uint16_t* kp = a.k + b * a.ks.batch + hk * a.ks.head;
  const uint16_t* vp = a.v + b * a.vs.batch + hk * a.vs.head;
  const int64_t nk = a.causal ? min64(a.nkb, qb + 1) : a.nkb;

  load_tile_async<DH>(Qs, LDS, a.q + b * a.qs.batch + h * a.qs.head, a.qs.time, i0, kBQ, a.T);
  load_tile_async<DH>(dOs, LDS, a.dout + b * a.dos.batch + h * a.dos.head, a.dos.time, i0, kBQ, a.T);
  load_tile_async<DH>(Ks, LDS, kp, a.ks.time, 0, kBK, a.T);
  load_tile_async<DH>(Vs, LDS, vp, a.vs.time, 0, kBK, a.T);
  cp_async_commit();
  float L[2], Dr[2];  // rows g, g + 8: lse * log2(e), rowsum(dO ⊙ O)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = i0 + w0 + g + 8 * r;
    L[r] = i < a.T ? a.lse_in[bh * a.T + i] * kLog2e : 0.0f;
    Dr[r] = i < a.T ? a.dsum[bh * a.T + i] : 0.0f;
  }
  float dq[DH / 8][4];
#pragma unroll
  for (int dt = 0; dt < DH / 8; ++dt) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.0f;

  for (int64_t kb = 0; kb < nk; ++kb) {
    const int cur = int(kb & 1);
    if (kb + 1 < nk) {
      load_tile_async<DH>(Ks + (cur ^ 1) * kBK * LDS, LDS, kp, a.ks.time, (kb + 1) * kBK, kBK, a.T);
      load_tile_async<DH>(Vs + (cur ^ 1) * kBK * LDS, LDS, vp, a.vs.time, (kb + 1) * kBK, kBK, a.T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint16_t* Kc = Ks + cur * kBK * LDS;
    const uint16_t* Vc = Vs + cur * kBK * LDS;
    // S = Q K^T, dP = dO V^T: 16 x 64 per warp
    float s[8][4], dp[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DH / 16; ++kk) {
      uint32_t qa[4], oa[4];
      ldsm_x4(qa, smem_u32(Qs + a_off(lane, w0, kk * 16, LDS)));
      ldsm_x4(oa, smem_u32(dOs + a_off(lane, w0, kk * 16, LDS)));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bk[4], bv[4];
        ldsm_x4(bk, smem_u32(Kc + bt_off(lane, np * 16, kk * 16, LDS)));
        ldsm_x4(bv, smem_u32(Vc + bt_off(lane, np * 16, kk * 16, LDS)));
        mma(s[2 * np], qa, bk[0], bk[1]);
        mma(s[2 * np + 1], qa, bk[2], bk[3]);
        mma(dp[2 * np], oa, bv[0], bv[1]);
        mma(dp[2 * np + 1], oa, bv[2], bv[3]);
      }
    }
    const int Ti = int(a.T), jb = int(kb * kBK) + 2 * tq, ib = int(i0) + w0 + g;  // T < 2^31 (checked on the host)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1, j = jb + nt * 8 + (e & 1), i = ib + 8 * r;
        const bool ok = i < Ti && j < Ti && (!a.causal || j <= i);
        const float p = ok ? exp2f(s[nt][e] * a.scale_log2 - L[r]) : 0.0f;
        dp[nt][e] = p * (dp[nt][e] - Dr[r]);  // dS
      }
    }
    // dQ += dS K: 4 k-steps of 16 keys
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t sa[4];
      acc_to_a(sa, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int dd = 0; dd < DH / 16; ++dd) {
        uint32_t bk[4];
        ldsm_x4_trans(bk, smem_u32(Kc + b_off(lane, kk * 16, dd * 16, LDS)));
        mma(dq[2 * dd], sa, bk[0], bk[1]);
        mma(dq[2 * dd + 1], sa, bk[2], bk[3]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {  // dq = scale dQ
    const int64_t i = i0 + w0 + g + 8 * r;
    if (i >= a.T) continue;
    uint16_t* qrow = a.dq + b * a.dqs.batch + h * a.dqs.head + i * a.dqs.time;
#pragma unroll
    for (int dt = 0; dt < DH / 8; ++dt)
      *reinterpret_cast<uint32_t*>(qrow + dt * 8 + 2 * tq) =
          pack_bf16(dq[dt][2 * r] * a.scale, dq[dt][2 * r + 1] * a.scale);
  }
}

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
  return a;
}

std::atomic<int> g_forward_m_tiles{2};

}  // namespace

void set_attention_forward_m_tiles(int m_tiles) {
  UOE_CHECK(m_tiles == 1 || m_tiles == 2, "[set_attention_forward_m_tiles] 1 or 2 m-tiles per warp, got ", m_tiles);
  g_forward_m_tiles = m_tiles;
}
int attention_forward_m_tiles() { return g_forward_m_tiles; }

void attention_forward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                           const uint16_t* v, AttnStrides vs, uint16_t* out, AttnStrides os, float* lse) {
  const char* op = "scaled_dot_product_attention";
  with_head_dim(s, op, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    if (s.B == 0 || s.T == 0) return;
    const LaunchContext c = launch_context(op);
    MmaArgs a = make_args(s, op);
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse_out = lse, a.qs = qs, a.ks = ks, a.vs = vs, a.os = os;
    auto run = [&](auto m_tiles) {  // one block per (b, h, tile of 64·MT queries)
      constexpr int MT = decltype(m_tiles)::value;
      launch(attn_fwd_mma_kernel<DH, MT>, (s.T + kBQ * MT - 1) / (kBQ * MT) * s.B * s.H, fwd_smem<DH, MT>(), c, op,
             a);
    };
    if (attention_forward_m_tiles() == 2) run(std::integral_constant<int, 2>{});
    else run(std::integral_constant<int, 1>{});
  });
}

void attention_backward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                            const uint16_t* v, AttnStrides vs, const float* lse, const float* dsum,
                            const uint16_t* dout, AttnStrides dos, uint16_t* dq, AttnStrides dqs, uint16_t* dk,
                            AttnStrides dks, uint16_t* dv, AttnStrides dvs) {
  const char* op = "scaled_dot_product_attention backward";
  with_head_dim(s, op, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    if (s.B == 0 || s.T == 0) return;
    const LaunchContext c = launch_context(op);
    MmaArgs a = make_args(s, op);
    a.q = q, a.k = k, a.v = v, a.dout = dout, a.lse_in = lse, a.dsum = dsum;
    a.qs = qs, a.ks = ks, a.vs = vs, a.dos = dos, a.dqs = dqs, a.dks = dks, a.dvs = dvs;
    a.dq = dq, a.dk = dk, a.dv = dv;
    launch(attn_bwd_kv_mma_kernel<DH>, a.nkb * s.B * s.Hkv, kv_smem<DH>(), c, op, a);
    launch(attn_bwd_q_mma_kernel<DH>, a.nqb * s.B * s.H, q_smem<DH>(), c, op, a);
  });
}

}  // namespace uoe::cuda::detail
