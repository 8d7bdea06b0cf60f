// The scalar tiled FlashAttention-2 kernels of the CUDA attention (float, double, and bf16 storage computed in float;
// launched by cuda/attention_kernels.cu, run on the CPU by uoe_cuda_emu_tests): one block of 4 warps per (b, h,
// query tile) for the forward and dq, per (b, kv head, key tile) for dk/dv; tiles of BM rows in shared memory.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "cuda/dynamic_smem.cuh"
#include "cuda/storage_access.cuh"
#include "ops/kernels/attention.h"

namespace uoe::cuda {
namespace {

constexpr int kThreads = 128;  // 4 warps per block
constexpr int kWarps = kThreads / 32;

__host__ __device__ __forceinline__ int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
// Rows of a tile of `bm` starting at `start` that lie inside [0, total).
__device__ __forceinline__ int rows_in_tile(int64_t total, int64_t start, int bm) {
  return total - start < bm ? int(total - start) : bm;
}

__device__ __forceinline__ float ex(float x) { return expf(x); }
__device__ __forceinline__ double ex(double x) { return exp(x); }
__device__ __forceinline__ float ln(float x) { return logf(x); }
__device__ __forceinline__ double ln(double x) { return log(x); }

// Arguments of every scalar kernel. S: storage type, C: compute type (lse and dsum are C).
template <typename S, typename C>
struct Args {
  int64_t B, H, Hkv, T, Dh, G, nqb, nkb;
  C scale;
  bool causal;
  const S *q, *k, *v, *dout;
  AttnStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  S *out, *dq, *dk, *dv;
  C* lse_out;
  const C *lse_in, *dsum;
};

// dst[r][c] = src[r * stride + c] for r < valid, 0 for valid <= r < rows; c < Dh; dst rows ld apart.
template <typename S, typename C>
__device__ __forceinline__ void load_tile(C* dst, int ld, const S* src, int64_t stride, int valid, int rows,
                                          int64_t Dh) {
  for (int64_t e = threadIdx.x; e < rows * Dh; e += blockDim.x) {
    const int r = int(e / Dh);
    const int64_t c = e % Dh;
    dst[r * ld + c] = r < valid ? load_as<C>(src + r * stride + c) : C(0);
  }
}

// Shared memory in elements of C; ld = Dh + 1 (odd row pitch: a warp walking a column hits distinct banks).
template <typename C>
__device__ __forceinline__ C* smem_base() {
  return reinterpret_cast<C*>(dynamic_smem());
}
size_t fwd_smem_elems(int bm, int64_t Dh) { return size_t(4 * bm * (Dh + 1) + bm * (bm + 1) + 3 * bm); }
size_t kv_smem_elems(int bm, int64_t Dh) { return size_t(6 * bm * (Dh + 1) + 2 * bm * (bm + 1) + 2 * bm); }
size_t q_smem_elems(int bm, int64_t Dh) { return size_t(5 * bm * (Dh + 1) + bm * (bm + 1) + 2 * bm); }

// ---- forward: one block per (b, h, query tile of BM rows) ------------------------------------------------------
template <typename S, typename C, int BM>
__global__ void __launch_bounds__(kThreads) attn_fwd_kernel(const Args<S, C> a) {
  const int64_t Dh = a.Dh, BH = a.B * a.H;
  const int ld = int(Dh) + 1, lds = BM + 1, lane = threadIdx.x & 31, warp = threadIdx.x / 32;
  const int64_t task = blockIdx.x, qb = a.nqb - 1 - task / BH, bh = task % BH;  // heavy causal tiles first
  const int64_t b = bh / a.H, h = bh % a.H, hk = h / a.G, i0 = qb * BM;
  const int qn = rows_in_tile(a.T, i0, BM);
  C* Qs = smem_base<C>();   // [BM][ld]
  C* Ks = Qs + BM * ld;     // [BM][ld]
  C* Vs = Ks + BM * ld;     // [BM][ld]
  C* Os = Vs + BM * ld;     // [BM][ld] unnormalised output rows
  C* Ss = Os + BM * ld;     // [BM][lds] scores, then probabilities
  C* mrow = Ss + BM * lds;  // [BM] running max
  C* lrow = mrow + BM;      // [BM] running sum
  C* arow = lrow + BM;      // [BM] rescale of O for the current key tile
  const S* kp = a.k + b * a.ks.batch + hk * a.ks.head;
  const S* vp = a.v + b * a.vs.batch + hk * a.vs.head;
  load_tile(Qs, ld, a.q + b * a.qs.batch + h * a.qs.head + i0 * a.qs.time, a.qs.time, qn, BM, Dh);
  for (int64_t e = threadIdx.x; e < BM * Dh; e += blockDim.x) Os[(e / Dh) * ld + e % Dh] = C(0);
  for (int i = threadIdx.x; i < BM; i += blockDim.x) mrow[i] = C(-INFINITY), lrow[i] = C(0);
  const int64_t nk = a.causal ? ceil_div(i0 + qn, BM) : a.nkb;  // causal: tiles above the diagonal skipped
  for (int64_t kb = 0; kb < nk; ++kb) {
    const int64_t j0 = kb * BM;
    const int kn = rows_in_tile(a.T, j0, BM);
    __syncthreads();  // the previous tile's readers are done
    load_tile(Ks, ld, kp + j0 * a.ks.time, a.ks.time, kn, BM, Dh);
    load_tile(Vs, ld, vp + j0 * a.vs.time, a.vs.time, kn, BM, Dh);
    __syncthreads();
    // S = scale * Q K^T, masked entries -inf (key j0+j visible to query i0+i iff j0+j <= i0+i under causal)
    for (int e = threadIdx.x; e < BM * BM; e += blockDim.x) {
      const int i = e / BM, j = e % BM;
      const C *qr = Qs + i * ld, *kr = Ks + j * ld;
      C acc = C(0);
      for (int64_t d = 0; d < Dh; ++d) acc += qr[d] * kr[d];
      const bool ok = j < kn && (!a.causal || j0 + j <= i0 + i);
      Ss[i * lds + j] = ok ? acc * a.scale : C(-INFINITY);
    }
    __syncthreads();
    // Online softmax, one warp per row: m' = max(m, max_j s), p = exp(s - m'), l' = exp(m - m') l + sum p.
    for (int i = warp; i < BM; i += kWarps) {
      C* sr = Ss + i * lds;
      const C mold = mrow[i];
      C mx = mold;
      for (int j = lane; j < BM; j += 32) mx = mx > sr[j] ? mx : sr[j];
      for (int off = 16; off > 0; off /= 2) {
        const C o = __shfl_xor_sync(0xffffffffu, mx, off);
        mx = mx > o ? mx : o;
      }
      const C ms = mx == C(-INFINITY) ? C(0) : mx;  // fully masked row so far: p = 0, alpha harmless
      const C alpha = ex(mold - ms);
      C sum = C(0);
      for (int j = lane; j < BM; j += 32) {
        const C p = ex(sr[j] - ms);
        sr[j] = p;
        sum += p;
      }
      for (int off = 16; off > 0; off /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
      __syncwarp();
      if (lane == 0) lrow[i] = alpha * lrow[i] + sum, mrow[i] = mx, arow[i] = alpha;
    }
    __syncthreads();
    // O = diag(alpha) O + P V
    for (int64_t e = threadIdx.x; e < BM * Dh; e += blockDim.x) {
      const int i = int(e / Dh);
      const int64_t c = e % Dh;
      const C* pr = Ss + i * lds;
      C acc = arow[i] * Os[i * ld + c];
      for (int j = 0; j < kn; ++j) acc += pr[j] * Vs[j * ld + c];
      Os[i * ld + c] = acc;
    }
  }
  __syncthreads();
  S* op = a.out + b * a.os.batch + h * a.os.head + i0 * a.os.time;
  for (int64_t e = threadIdx.x; e < qn * Dh; e += blockDim.x) {  // out = O / l
    const int i = int(e / Dh);
    const int64_t c = e % Dh;
    store_as(op + i * a.os.time + c, Os[i * ld + c] * (C(1) / lrow[i]));
  }
  for (int i = threadIdx.x; i < qn; i += blockDim.x) a.lse_out[bh * a.T + i0 + i] = mrow[i] + ln(lrow[i]);
}

// ---- backward ---------------------------------------------------------------------------------------------------
// dsum[b,h,t] = sum_d dout ⊙ out (one warp per row, fixed lane split and tree).
template <typename S, typename C>
__global__ void attn_dsum_kernel(int64_t B, int64_t H, int64_t T, int64_t Dh, const S* out, AttnStrides os,
                                 const S* dout, AttnStrides dos, C* dsum) {
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  const int64_t rows = B * H * T;
  for (int64_t r = blockIdx.x * int64_t(warps) + threadIdx.x / 32; r < rows; r += int64_t(gridDim.x) * warps) {
    const int64_t t = r % T, bh = r / T, b = bh / H, h = bh % H;
    const S* o = out + b * os.batch + h * os.head + t * os.time;
    const S* g = dout + b * dos.batch + h * dos.head + t * dos.time;
    C acc = C(0);
    for (int64_t d = lane; d < Dh; d += 32) acc += load_as<C>(o + d) * load_as<C>(g + d);
    for (int off = 16; off > 0; off /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if (lane == 0) dsum[r] = acc;
  }
}

// P and dS of one (query tile, key tile) pair: p = exp(scale q·k - lse), ds = p (dO·v - D), 0 where masked.
// Qs, dOs: query rows; Ks, Vs: key rows (ld apart); Ls, Ds: per query row; P (nullable), dS: [BM][BM + 1].
template <typename C, int BM>
__device__ __forceinline__ void tile_dscores(int64_t Dh, int ld, int64_t i0, int qn, int64_t j0, int kn, bool causal,
                                             C scale, const C* Qs, const C* dOs, const C* Ks, const C* Vs,
                                             const C* Ls, const C* Ds, C* P, C* dS) {
  const int lds = BM + 1;
  for (int e = threadIdx.x; e < BM * BM; e += blockDim.x) {
    const int i = e / BM, j = e % BM;
    const C *qr = Qs + i * ld, *gr = dOs + i * ld, *kr = Ks + j * ld, *vr = Vs + j * ld;
    C s = C(0), dp = C(0);
    for (int64_t d = 0; d < Dh; ++d) s += qr[d] * kr[d], dp += gr[d] * vr[d];
    const bool ok = i < qn && j < kn && (!causal || j0 + j <= i0 + i);
    const C p = ok ? ex(s * scale - Ls[i]) : C(0);
    if (P) P[i * lds + j] = p;
    dS[i * lds + j] = p * (dp - Ds[i]);
  }
}

// dk, dv: one block per (b, kv head, key tile); loops over the group's q heads and the query tiles in order.
template <typename S, typename C, int BM>
__global__ void __launch_bounds__(kThreads) attn_bwd_kv_kernel(const Args<S, C> a) {
  const int64_t Dh = a.Dh, BHk = a.B * a.Hkv;
  const int ld = int(Dh) + 1, lds = BM + 1;
  const int64_t task = blockIdx.x, bh = task % BHk, kb = task / BHk;
  const int64_t b = bh / a.Hkv, hk = bh % a.Hkv, j0 = kb * BM;
  const int kn = rows_in_tile(a.T, j0, BM);
  C* Ks = smem_base<C>();  // [BM][ld] each
  C* Vs = Ks + BM * ld;
  C* dKs = Vs + BM * ld;
  C* dVs = dKs + BM * ld;
  C* Qs = dVs + BM * ld;
  C* dOs = Qs + BM * ld;
  C* P = dOs + BM * ld;  // [BM][lds]
  C* dS = P + BM * lds;  // [BM][lds]
  C* Ls = dS + BM * lds;  // [BM]
  C* Ds = Ls + BM;        // [BM]
  load_tile(Ks, ld, a.k + b * a.ks.batch + hk * a.ks.head + j0 * a.ks.time, a.ks.time, kn, BM, Dh);
  load_tile(Vs, ld, a.v + b * a.vs.batch + hk * a.vs.head + j0 * a.vs.time, a.vs.time, kn, BM, Dh);
  for (int64_t e = threadIdx.x; e < BM * Dh; e += blockDim.x) {
    const int64_t o = (e / Dh) * ld + e % Dh;
    dKs[o] = C(0), dVs[o] = C(0);
  }
  for (int64_t g = 0; g < a.G; ++g) {
    const int64_t h = hk * a.G + g;
    for (int64_t qb = a.causal ? j0 / BM : 0; qb < a.nqb; ++qb) {  // causal: query tiles from the diagonal on
      const int64_t i0 = qb * BM;
      const int qn = rows_in_tile(a.T, i0, BM);
      __syncthreads();
      load_tile(Qs, ld, a.q + b * a.qs.batch + h * a.qs.head + i0 * a.qs.time, a.qs.time, qn, BM, Dh);
      load_tile(dOs, ld, a.dout + b * a.dos.batch + h * a.dos.head + i0 * a.dos.time, a.dos.time, qn, BM, Dh);
      for (int i = threadIdx.x; i < BM; i += blockDim.x) {
        const int64_t r = (b * a.H + h) * a.T + i0 + i;
        Ls[i] = i < qn ? a.lse_in[r] : C(0);
        Ds[i] = i < qn ? a.dsum[r] : C(0);
      }
      __syncthreads();
      tile_dscores<C, BM>(Dh, ld, i0, qn, j0, kn, a.causal, a.scale, Qs, dOs, Ks, Vs, Ls, Ds, P, dS);
      __syncthreads();
      // dV += P^T dO, dK += dS^T Q (query rows summed in order)
      for (int64_t e = threadIdx.x; e < BM * Dh; e += blockDim.x) {
        const int j = int(e / Dh);
        const int64_t c = e % Dh, o = j * ld + c;
        C accv = dVs[o], acck = dKs[o];
        for (int i = 0; i < qn; ++i) accv += P[i * lds + j] * dOs[i * ld + c], acck += dS[i * lds + j] * Qs[i * ld + c];
        dVs[o] = accv, dKs[o] = acck;
      }
    }
  }
  __syncthreads();
  S* dkp = a.dk + b * a.dks.batch + hk * a.dks.head + j0 * a.dks.time;
  S* dvp = a.dv + b * a.dvs.batch + hk * a.dvs.head + j0 * a.dvs.time;
  for (int64_t e = threadIdx.x; e < kn * Dh; e += blockDim.x) {  // dk = scale dK, dv = dV
    const int j = int(e / Dh);
    const int64_t c = e % Dh;
    store_as(dkp + j * a.dks.time + c, dKs[j * ld + c] * a.scale);
    store_as(dvp + j * a.dvs.time + c, dVs[j * ld + c]);
  }
}

// dq: one block per (b, h, query tile); loops over the key tiles in order.
template <typename S, typename C, int BM>
__global__ void __launch_bounds__(kThreads) attn_bwd_q_kernel(const Args<S, C> a) {
  const int64_t Dh = a.Dh, BH = a.B * a.H;
  const int ld = int(Dh) + 1, lds = BM + 1;
  const int64_t task = blockIdx.x, qb = a.nqb - 1 - task / BH, bh = task % BH;
  const int64_t b = bh / a.H, h = bh % a.H, hk = h / a.G, i0 = qb * BM;
  const int qn = rows_in_tile(a.T, i0, BM);
  C* Qs = smem_base<C>();  // [BM][ld] each
  C* dOs = Qs + BM * ld;
  C* Ks = dOs + BM * ld;
  C* Vs = Ks + BM * ld;
  C* dQs = Vs + BM * ld;
  C* dS = dQs + BM * ld;  // [BM][lds]
  C* Ls = dS + BM * lds;  // [BM]
  C* Ds = Ls + BM;        // [BM]
  load_tile(Qs, ld, a.q + b * a.qs.batch + h * a.qs.head + i0 * a.qs.time, a.qs.time, qn, BM, Dh);
  load_tile(dOs, ld, a.dout + b * a.dos.batch + h * a.dos.head + i0 * a.dos.time, a.dos.time, qn, BM, Dh);
  for (int64_t e = threadIdx.x; e < BM * Dh; e += blockDim.x) dQs[(e / Dh) * ld + e % Dh] = C(0);
  for (int i = threadIdx.x; i < BM; i += blockDim.x) {
    Ls[i] = i < qn ? a.lse_in[bh * a.T + i0 + i] : C(0);
    Ds[i] = i < qn ? a.dsum[bh * a.T + i0 + i] : C(0);
  }
  const S* kp = a.k + b * a.ks.batch + hk * a.ks.head;
  const S* vp = a.v + b * a.vs.batch + hk * a.vs.head;
  const int64_t nk = a.causal ? ceil_div(i0 + qn, BM) : a.nkb;
  for (int64_t kb = 0; kb < nk; ++kb) {
    const int64_t j0 = kb * BM;
    const int kn = rows_in_tile(a.T, j0, BM);
    __syncthreads();
    load_tile(Ks, ld, kp + j0 * a.ks.time, a.ks.time, kn, BM, Dh);
    load_tile(Vs, ld, vp + j0 * a.vs.time, a.vs.time, kn, BM, Dh);
    __syncthreads();
    tile_dscores<C, BM>(Dh, ld, i0, qn, j0, kn, a.causal, a.scale, Qs, dOs, Ks, Vs, Ls, Ds, nullptr, dS);
    __syncthreads();
    for (int64_t e = threadIdx.x; e < BM * Dh; e += blockDim.x) {  // dQ += dS K (key rows summed in order)
      const int i = int(e / Dh);
      const int64_t c = e % Dh;
      C acc = dQs[i * ld + c];
      for (int j = 0; j < kn; ++j) acc += dS[i * lds + j] * Ks[j * ld + c];
      dQs[i * ld + c] = acc;
    }
  }
  __syncthreads();
  S* dqp = a.dq + b * a.dqs.batch + h * a.dqs.head + i0 * a.dqs.time;
  for (int64_t e = threadIdx.x; e < qn * Dh; e += blockDim.x) {  // dq = scale dQ
    const int i = int(e / Dh);
    const int64_t c = e % Dh;
    store_as(dqp + i * a.dqs.time + c, dQs[i * ld + c] * a.scale);
  }
}

// Dh == 0: every score is 0, lse = log(number of visible keys).
template <typename C>
__global__ void attn_empty_lse_kernel(int64_t rows, int64_t T, bool causal, C* lse) {
  for (int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x)
    lse[r] = ln(C(causal ? r % T + 1 : T));
}

template <typename S, typename C>
Args<S, C> make_args(const AttnShape& s, int bm) {
  Args<S, C> a{};
  a.B = s.B, a.H = s.H, a.Hkv = s.Hkv, a.T = s.T, a.Dh = s.Dh, a.G = s.H / s.Hkv;
  a.nqb = ceil_div(s.T, bm), a.nkb = ceil_div(s.T, bm);
  a.scale = C(s.scale), a.causal = s.causal;
  return a;
}

}  // namespace
}  // namespace uoe::cuda
