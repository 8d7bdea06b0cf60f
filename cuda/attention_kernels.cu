// uoe::cuda fused attention: scalar tiled FlashAttention-2 kernels (float, double, bf16 storage) and dispatch.
#include "cuda/attention_mma.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "core/slow_paths.h"
#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/storage_access.cuh"
#include "cuda/stream.h"

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
  extern __shared__ __align__(16) unsigned char smem_raw[];
  return reinterpret_cast<C*>(smem_raw);
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

// ---- host side ------------------------------------------------------------------------------------------------
void check_shape(const AttnShape& s) {
  UOE_CHECK(s.B >= 0 && s.T >= 0 && s.Dh >= 0 && s.H > 0 && s.Hkv > 0, "attention: bad shape B=", s.B, " H=", s.H,
            " Hkv=", s.Hkv, " T=", s.T, " Dh=", s.Dh);
  UOE_CHECK(s.H % s.Hkv == 0, "attention: H=", s.H, " is not a multiple of Hkv=", s.Hkv);
}

int max_smem_optin(const LaunchContext& c, const char* op) {
  int v = 0;
  UOE_CUDA_CHECK(op, cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, c.device));
  return v;
}

// Tile rows: the largest of 64 / 32 / 16 (at most `pref`) whose shared memory fits the device.
int pick_bm(size_t (*elems)(int, int64_t), int64_t Dh, size_t csize, int max_smem, int pref, const char* op) {
  for (int bm : {64, 32, 16})
    if (bm <= pref && elems(bm, Dh) * csize <= size_t(max_smem)) return bm;
  fail("[", op, "] head dim ", Dh, " is too large for the CUDA attention kernels (shared memory ", max_smem,
       " bytes per block)");
}

template <typename Kernel>
void launch(Kernel kernel, int64_t blocks, size_t smem, const LaunchContext& c, const char* op, auto&&... args) {
  UOE_CHECK(blocks < (int64_t(1) << 31), "[", op, "] too many thread blocks (", blocks, ")");
  UOE_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<unsigned(blocks), kThreads, smem, c.stream>>>(args...);
  check_launch(op);
}

template <typename S, typename C>
Args<S, C> make_args(const AttnShape& s, int bm) {
  Args<S, C> a{};
  a.B = s.B, a.H = s.H, a.Hkv = s.Hkv, a.T = s.T, a.Dh = s.Dh, a.G = s.H / s.Hkv;
  a.nqb = ceil_div(s.T, bm), a.nkb = ceil_div(s.T, bm);
  a.scale = C(s.scale), a.causal = s.causal;
  return a;
}

constexpr int preferred_bm(size_t csize) { return csize >= 8 ? 32 : 64; }

template <typename S, typename C>
void forward_scalar(const AttnShape& s, const S* q, AttnStrides qs, const S* k, AttnStrides ks, const S* v,
                    AttnStrides vs, S* out, AttnStrides os, C* lse) {
  const char* op = "scaled_dot_product_attention";
  check_shape(s);
  if (s.B == 0 || s.T == 0) return;
  const LaunchContext c = launch_context(op);
  if (s.Dh == 0) {
    const int64_t rows = s.B * s.H * s.T;
    attn_empty_lse_kernel<C><<<unsigned(std::min<int64_t>(ceil_div(rows, 256), 1 << 20)), 256, 0, c.stream>>>(
        rows, s.T, s.causal, lse);
    check_launch(op);
    return;
  }
  const int bm = pick_bm(fwd_smem_elems, s.Dh, sizeof(C), max_smem_optin(c, op), preferred_bm(sizeof(C)), op);
  Args<S, C> a = make_args<S, C>(s, bm);
  a.q = q, a.k = k, a.v = v, a.qs = qs, a.ks = ks, a.vs = vs, a.out = out, a.os = os, a.lse_out = lse;
  const size_t smem = fwd_smem_elems(bm, s.Dh) * sizeof(C);
  const int64_t blocks = a.nqb * s.B * s.H;
  if (bm == 64) launch(attn_fwd_kernel<S, C, 64>, blocks, smem, c, op, a);
  if (bm == 32) launch(attn_fwd_kernel<S, C, 32>, blocks, smem, c, op, a);
  if (bm == 16) launch(attn_fwd_kernel<S, C, 16>, blocks, smem, c, op, a);
}


template <typename S, typename C>
void launch_dsum(const AttnShape& s, const S* out, AttnStrides os, const S* dout, AttnStrides dos, C* dsum,
                 const LaunchContext& c, const char* op) {
  const int64_t rows = s.B * s.H * s.T;
  const unsigned blocks = unsigned(std::clamp<int64_t>(ceil_div(rows, 8), 1, int64_t(1) << 20));
  attn_dsum_kernel<S, C><<<blocks, 256, 0, c.stream>>>(s.B, s.H, s.T, s.Dh, out, os, dout, dos, dsum);
  check_launch(op);
}

template <typename S, typename C>
void backward_scalar(const AttnShape& s, const S* q, AttnStrides qs, const S* k, AttnStrides ks, const S* v,
                     AttnStrides vs, const S* out, AttnStrides os, const C* lse, const S* dout, AttnStrides dos, S* dq,
                     AttnStrides dqs, S* dk, AttnStrides dks, S* dv, AttnStrides dvs) {
  const char* op = "scaled_dot_product_attention backward";
  check_shape(s);
  if (s.B == 0 || s.T == 0 || s.Dh == 0) return;  // nothing to write
  const LaunchContext c = launch_context(op);
  const int max_smem = max_smem_optin(c, op);
  const int pref = preferred_bm(sizeof(C));
  const int bkv = pick_bm(kv_smem_elems, s.Dh, sizeof(C), max_smem, pref, op);
  const int bq = pick_bm(q_smem_elems, s.Dh, sizeof(C), max_smem, pref, op);
  DeviceBuffer dsum(c.device, size_t(s.B * s.H * s.T) * sizeof(C));
  launch_dsum(s, out, os, dout, dos, dsum.get<C>(), c, op);
  Args<S, C> a = make_args<S, C>(s, bkv);
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.lse_in = lse, a.dsum = dsum.get<C>();
  a.qs = qs, a.ks = ks, a.vs = vs, a.os = os, a.dos = dos, a.dqs = dqs, a.dks = dks, a.dvs = dvs;
  a.dq = dq, a.dk = dk, a.dv = dv;
  {
    const size_t smem = kv_smem_elems(bkv, s.Dh) * sizeof(C);
    const int64_t blocks = a.nkb * s.B * s.Hkv;
    if (bkv == 64) launch(attn_bwd_kv_kernel<S, C, 64>, blocks, smem, c, op, a);
    if (bkv == 32) launch(attn_bwd_kv_kernel<S, C, 32>, blocks, smem, c, op, a);
    if (bkv == 16) launch(attn_bwd_kv_kernel<S, C, 16>, blocks, smem, c, op, a);
  }
  {
    a.nqb = ceil_div(s.T, bq), a.nkb = ceil_div(s.T, bq);
    const size_t smem = q_smem_elems(bq, s.Dh) * sizeof(C);
    const int64_t blocks = a.nqb * s.B * s.H;
    if (bq == 64) launch(attn_bwd_q_kernel<S, C, 64>, blocks, smem, c, op, a);
    if (bq == 32) launch(attn_bwd_q_kernel<S, C, 32>, blocks, smem, c, op, a);
    if (bq == 16) launch(attn_bwd_q_kernel<S, C, 16>, blocks, smem, c, op, a);
  }
}

bool strides_aligned(const AttnStrides& st) { return st.batch % 8 == 0 && st.head % 8 == 0 && st.time % 8 == 0; }

const __nv_bfloat16* bf(const BFloat16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* bf(BFloat16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }
const uint16_t* bits(const BFloat16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* bits(BFloat16* p) { return reinterpret_cast<uint16_t*>(p); }

}  // namespace

// ---- public entry points ------------------------------------------------------------------------------------
template <typename T>
void attention_forward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                       AttnStrides vs, T* out, AttnStrides os, T* lse) {
  forward_scalar<T, T>(s, q, qs, k, ks, v, vs, out, os, lse);
}

template <typename T>
void attention_backward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                        AttnStrides vs, const T* out, AttnStrides os, const T* lse, const T* dout, AttnStrides dos,
                        T* dq, AttnStrides dqs, T* dk, AttnStrides dks, T* dv, AttnStrides dvs) {
  backward_scalar<T, T>(s, q, qs, k, ks, v, vs, out, os, lse, dout, dos, dq, dqs, dk, dks, dv, dvs);
}

namespace {

enum class ScalarReason { none, head_dim, misaligned };

// Why bf16 calls with these arguments cannot take the tensor-core kernels (none: they can).
ScalarReason scalar_reason(const AttnShape& s, std::initializer_list<const void*> ptrs,
                           std::initializer_list<AttnStrides> strides) {
  if (!detail::mma_head_dim(s.Dh)) return ScalarReason::head_dim;
  for (const void* p : ptrs)
    if (!aligned16(p)) return ScalarReason::misaligned;
  for (const AttnStrides& st : strides)
    if (!strides_aligned(st)) return ScalarReason::misaligned;
  return ScalarReason::none;
}

// Counts a bf16 call that runs the scalar float32-compute kernels (core/slow_paths.h).
void count_scalar_fallback(ScalarReason reason, const AttnShape& s, const char* op) {
  const std::string cost = "; it runs the scalar float32 kernels on CUDA cores instead of tensor cores, "
                           "many times slower at long sequences";
  if (reason == ScalarReason::head_dim)
    slow_paths::count("attention_bf16_scalar.head_dim",
                      std::string(op) + " (bf16): head dim " + std::to_string(s.Dh) +
                          " is not supported by the tensor-core kernels (64, 96 or 128)" + cost);
  else
    slow_paths::count("attention_bf16_scalar.misaligned",
                      std::string(op) + " (bf16): an operand's address or batch/head/time stride is not 16-byte "
                                        "aligned (a view with an odd offset or stride)" + cost);
}

// Whether the call takes the tensor-core kernels; counts it when it does not.
bool tensor_cores_or_count(const AttnShape& s, std::initializer_list<const void*> ptrs,
                           std::initializer_list<AttnStrides> strides, const char* op) {
  const ScalarReason reason = scalar_reason(s, ptrs, strides);
  if (reason == ScalarReason::none) return true;
  count_scalar_fallback(reason, s, op);
  return false;
}

}  // namespace

bool attention_bf16_uses_tensor_cores(const AttnShape& s, std::initializer_list<const void*> ptrs,
                                      std::initializer_list<AttnStrides> strides) {
  return scalar_reason(s, ptrs, strides) == ScalarReason::none;
}

void attention_forward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                            const BFloat16* v, AttnStrides vs, BFloat16* out, AttnStrides os, float* lse) {
  check_shape(s);
  if (s.B == 0 || s.T == 0) return;
  if (tensor_cores_or_count(s, {q, k, v, out}, {qs, ks, vs, os}, "scaled_dot_product_attention"))
    return detail::attention_forward_mma(s, bits(q), qs, bits(k), ks, bits(v), vs, bits(out), os, lse);
  forward_scalar<__nv_bfloat16, float>(s, bf(q), qs, bf(k), ks, bf(v), vs, bf(out), os, lse);
}

void attention_backward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                             const BFloat16* v, AttnStrides vs, const BFloat16* out, AttnStrides os, const float* lse,
                             const BFloat16* dout, AttnStrides dos, BFloat16* dq, AttnStrides dqs, BFloat16* dk,
                             AttnStrides dks, BFloat16* dv, AttnStrides dvs) {
  const char* op = "scaled_dot_product_attention backward";
  check_shape(s);
  if (s.B == 0 || s.T == 0 || s.Dh == 0) return;
  if (tensor_cores_or_count(s, {q, k, v, dout, dq, dk, dv}, {qs, ks, vs, dos, dqs, dks, dvs}, op)) {
    const LaunchContext c = launch_context(op);
    DeviceBuffer dsum(c.device, size_t(s.B * s.H * s.T) * sizeof(float));
    launch_dsum(s, bf(out), os, bf(dout), dos, dsum.get<float>(), c, op);
    return detail::attention_backward_mma(s, bits(q), qs, bits(k), ks, bits(v), vs, lse, dsum.get<float>(),
                                          bits(dout), dos, bits(dq), dqs, bits(dk), dks, bits(dv), dvs);
  }
  backward_scalar<__nv_bfloat16, float>(s, bf(q), qs, bf(k), ks, bf(v), vs, bf(out), os, lse, bf(dout), dos, bf(dq),
                                        dqs, bf(dk), dks, bf(dv), dvs);
}

#define UOE_CUDA_ATTN_INSTANTIATE(T)                                                                              \
  template void attention_forward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*,     \
                                     AttnStrides, T*, AttnStrides, T*);                                            \
  template void attention_backward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*,    \
                                      AttnStrides, const T*, AttnStrides, const T*, const T*, AttnStrides, T*,     \
                                      AttnStrides, T*, AttnStrides, T*, AttnStrides);
UOE_CUDA_ATTN_INSTANTIATE(float)
UOE_CUDA_ATTN_INSTANTIATE(double)
#undef UOE_CUDA_ATTN_INSTANTIATE

}  // namespace uoe::cuda
