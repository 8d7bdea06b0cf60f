// The row kernels of the CUDA grouped SwiGLU experts (cuda/moe_experts.cu): gather rows by expert, SwiGLU forward
// and backward, combine, scatter back. Each has a 16-byte path (`vec`: eight bfloat16, or 16 bytes of any type in
// the copies) that the host picks when every pointer it passes is 16-byte aligned and the rows are multiples of 16
// bytes (vec16_rows): a warp then moves 512 bytes per access instead of 64. The element arithmetic and its order
// are the scalar path's, so both give the same bits, except swiglu_backward's dweights (a sum whose lane split
// differs). Device code only; private to moe_experts.cu.
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda/activation.cuh"
#include "cuda/storage_access.cuh"

namespace uoe::cuda {
namespace {

// The plan on the device: sorted row -> pair id, pair id -> sorted row (-1 empty), sorted row -> expert.
struct PlanView {
  const int64_t* pair;        // [P]
  const int64_t* row;         // [T*K]
  const int64_t* row_expert;  // [P]
};

// ---- 16-byte accesses ---------------------------------------------------------------------------------------
constexpr int kVec = 8;  // bfloat16 per 16 bytes

// True when rows of `width` elements of S are whole 16-byte units and every pointer (null ones aside) is 16-byte
// aligned: then every row of every one of them is.
template <typename S>
bool vec16_rows(int64_t width, std::initializer_list<const void*> pointers) {
  if ((width * int64_t(sizeof(S))) % 16 != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0) return false;
  return true;
}
// The bfloat16 path is for bfloat16 storage only (the float and double kernels keep their scalar loops).
template <typename S>
bool vec8_bf16(int64_t width, std::initializer_list<const void*> pointers) {
  return std::is_same_v<S, __nv_bfloat16> && width % kVec == 0 && vec16_rows<S>(width, pointers);
}

__device__ __forceinline__ void load8(const __nv_bfloat16* p, float (&v)[kVec]) {
  const uint4 u = *reinterpret_cast<const uint4*>(p);
  const __nv_bfloat162* h = reinterpret_cast<const __nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) {
    const float2 f = __bfloat1622float2(h[i]);
    v[2 * i] = f.x;
    v[2 * i + 1] = f.y;
  }
}
__device__ __forceinline__ void store8(__nv_bfloat16* p, const float (&v)[kVec]) {
  uint4 u;
  __nv_bfloat162* h = reinterpret_cast<__nv_bfloat162*>(&u);
#pragma unroll
  for (int i = 0; i < kVec / 2; ++i) h[i] = __floats2bfloat162_rn(v[2 * i], v[2 * i + 1]);
  *reinterpret_cast<uint4*>(p) = u;
}

// dst[0, n) = src[0, n) by this block's threads: 16 bytes at a time when vec.
template <typename T>
__device__ __forceinline__ void copy_row(T* dst, const T* src, int64_t n, bool vec) {
  if (vec) {
    const int64_t units = n * int64_t(sizeof(T)) / 16;
    for (int64_t c = threadIdx.x; c < units; c += blockDim.x)
      reinterpret_cast<uint4*>(dst)[c] = reinterpret_cast<const uint4*>(src)[c];
  } else {
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) dst[c] = src[c];
  }
}

// ---- the kernels ----------------------------------------------------------------------------------------------
// Per sorted row i (token t = pair / K, expert e): xs[i] = x[t]; gs[i] = gate[t, e] (gn == 1, a shared gate:
// gate[t, 0]); dys[i] = dy[t]; ws[i] = weights[pair]. Nullable outputs are skipped. One block per row, threads
// over the columns; vec_d: x, xs, dy, dys rows by 16 bytes; vec_g: gate, gs rows.
template <typename T>
__global__ void gather_rows_kernel(int64_t P, int64_t K, int64_t gn, int64_t d, int64_t dg, PlanView pv, const T* x,
                                   T* xs, const T* gate, T* gs, const T* dy, T* dys, const T* weights, T* ws,
                                   bool vec_d, bool vec_g) {
  for (int64_t i = blockIdx.x; i < P; i += gridDim.x) {
    const int64_t pr = pv.pair[i], t = pr / K;
    copy_row(xs + i * d, x + t * d, d, vec_d);
    if (gs) copy_row(gs + i * dg, gate + (t * gn + (gn == 1 ? 0 : pv.row_expert[i])) * dg, dg, vec_g);
    if (dys) copy_row(dys + i * d, dy + t * d, d, vec_d);
    if (ws && threadIdx.x == 0) ws[i] = weights[pr];
  }
}

// a = silu(hg) * hp; vec: eight at a time (count a multiple of 8).                        hg, hp, a: [count]
template <typename S>
__global__ void swiglu_forward_kernel(int64_t count, const S* hg, const S* hp, S* a, bool vec) {
  using C = compute_t<S>;
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x, step = int64_t(gridDim.x) * blockDim.x;
  if constexpr (std::is_same_v<S, __nv_bfloat16>) {
    if (vec) {
      for (int64_t e8 = first; e8 < count / kVec; e8 += step) {
        float g[kVec], p[kVec];
        load8(hg + e8 * kVec, g);
        load8(hp + e8 * kVec, p);
#pragma unroll
        for (int k = 0; k < kVec; ++k) g[k] = silu(g[k]) * p[k];
        store8(a + e8 * kVec, g);
      }
      return;
    }
  }
  for (int64_t e = first; e < count; e += step) store_as(a + e, silu(load_as<C>(hg + e)) * load_as<C>(hp + e));
}

// SwiGLU's backward at one element: in h = H_g, p = H_p, gj = (dY Wd^T)_j, w = the row's routing weight; out
// g = w A, dhg = dH_g, dhp = dH_p, and dot += A gj.
template <typename C>
__device__ __forceinline__ void swiglu_backward_element(C w, C h, C p, C gj, C& g, C& dhg, C& dhp, C& dot) {
  const C sl = silu(h);
  const C a = sl * p;
  dot += a * gj;
  const C da = w * gj;
  g = w * a;
  dhg = da * p * silu_grad(h);
  dhp = da * sl;
}

// One warp per sorted row (as swiglu_backward_row on the CPU). In: hg = H_g, hp = H_p, g = dY Wd^T, ws = routing
// weight. Out: g <- w A, dhg = dH_g, dhp = dH_p, dweights[pair] = <A, g> (fixed lane split and shuffle tree).
// vec: each lane takes eight consecutive elements at a time (R a multiple of 8).
template <typename S>
__global__ void swiglu_backward_kernel(int64_t P, int64_t R, const S* ws, const S* hg, const S* hp, S* g, S* dhg,
                                       S* dhp, PlanView pv, S* dweights, bool vec) {
  using C = compute_t<S>;
  const int lane = threadIdx.x & 31, warps = blockDim.x / 32;
  for (int64_t i = blockIdx.x * int64_t(warps) + threadIdx.x / 32; i < P; i += int64_t(gridDim.x) * warps) {
    const C w = load_as<C>(ws + i);
    const S *hgi = hg + i * R, *hpi = hp + i * R;
    S *gi = g + i * R, *dhgi = dhg + i * R, *dhpi = dhp + i * R;
    C dot = C(0);
    bool done = false;
    if constexpr (std::is_same_v<S, __nv_bfloat16>) {
      if (vec) {
        for (int64_t j = int64_t(lane) * kVec; j < R; j += 32 * kVec) {
          float h[kVec], p[kVec], gj[kVec], dh[kVec], dp[kVec];
          load8(hgi + j, h);
          load8(hpi + j, p);
          load8(gi + j, gj);
#pragma unroll
          for (int k = 0; k < kVec; ++k) swiglu_backward_element(w, h[k], p[k], gj[k], gj[k], dh[k], dp[k], dot);
          store8(gi + j, gj);
          store8(dhgi + j, dh);
          store8(dhpi + j, dp);
        }
        done = true;
      }
    }
    for (int64_t j = lane; j < R && !done; j += 32) {
      C gw, dh, dp;
      swiglu_backward_element(w, load_as<C>(hgi + j), load_as<C>(hpi + j), load_as<C>(gi + j), gw, dh, dp, dot);
      store_as(gi + j, gw);
      store_as(dhgi + j, dh);
      store_as(dhpi + j, dp);
    }
    for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    if (dweights && lane == 0) store_as(dweights + pv.pair[i], dot);
  }
}

// out[c, c + 8) = sum over the token's K slots, in k order, of (weight of the slot) * rows[row of the slot][c, c + 8),
// a slot without a row skipped; weights null: 1. The per-column sums of the scalar loops, eight at a time.
__device__ __forceinline__ void sum_slots8(int64_t K, const int64_t* slot_rows, const __nv_bfloat16* weights,
                                           const __nv_bfloat16* rows, int64_t width, int64_t c, __nv_bfloat16* out) {
  float acc[kVec] = {}, v[kVec];
  for (int64_t k = 0; k < K; ++k) {
    const int64_t r = slot_rows[k];
    if (r < 0) continue;
    load8(rows + r * width + c, v);
    if (weights) {
      const float wk = __bfloat162float(weights[k]);
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] += wk * v[e];
    } else {
#pragma unroll
      for (int e = 0; e < kVec; ++e) acc[e] += v[e];
    }
  }
  store8(out + c, acc);
}

// y_t = sum_k w_{t,k} o[row(t,k)], slots in k order. One block per token, threads over the columns; vec: eight
// columns per thread (o, y rows by 16 bytes).
template <typename S>
__global__ void combine_kernel(int64_t T_, int64_t K, int64_t d, PlanView pv, const S* weights, const S* o, S* y,
                               bool vec) {
  using C = compute_t<S>;
  for (int64_t t = blockIdx.x; t < T_; t += gridDim.x) {
    if constexpr (std::is_same_v<S, __nv_bfloat16>) {
      if (vec) {
        for (int64_t c = int64_t(threadIdx.x) * kVec; c < d; c += int64_t(blockDim.x) * kVec)
          sum_slots8(K, pv.row + t * K, weights + t * K, o, d, c, y + t * d);
        continue;
      }
    }
    for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
      C acc = C(0);
      for (int64_t k = 0; k < K; ++k) {
        const int64_t r = pv.row[t * K + k];
        if (r >= 0) acc += load_as<C>(weights + t * K + k) * load_as<C>(o + r * d + c);
      }
      store_as(y + t * d + c, acc);
    }
  }
}

// Per token, slots in k order: dx_t = sum_k dxs[row]; dgate[t, e] = sum_{k: expert e} dgs[row] (0 for
// unselected experts; gn == 1, a shared gate: dgate[t, 0] = sum_k dgs[row]); dweights of empty slots = 0.
// Nullable outputs are skipped. vec: dx eight columns per thread (dxs, dx rows by 16 bytes).
template <typename S>
__global__ void scatter_back_kernel(int64_t T_, int64_t K, int64_t gn, int64_t d, int64_t dg, PlanView pv,
                                    const S* dxs, S* dx, const S* dgs, S* dgate, S* dweights, bool vec) {
  using C = compute_t<S>;
  for (int64_t t = blockIdx.x; t < T_; t += gridDim.x) {
    const int64_t* rows = pv.row + t * K;
    if (dweights)
      for (int64_t k = threadIdx.x; k < K; k += blockDim.x)
        if (rows[k] < 0) store_as(dweights + t * K + k, C(0));
    bool dx_done = !dx;
    if constexpr (std::is_same_v<S, __nv_bfloat16>) {
      if (vec && dx) {
        for (int64_t c = int64_t(threadIdx.x) * kVec; c < d; c += int64_t(blockDim.x) * kVec)
          sum_slots8(K, rows, nullptr, dxs, d, c, dx + t * d);
        dx_done = true;
      }
    }
    if (!dx_done)
      for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
        C acc = C(0);
        for (int64_t k = 0; k < K; ++k)
          if (rows[k] >= 0) acc += load_as<C>(dxs + rows[k] * d + c);
        store_as(dx + t * d + c, acc);
      }
    if (dgate)
      for (int64_t j = threadIdx.x; j < gn * dg; j += blockDim.x) {
        const int64_t e = j / dg, c = j % dg;
        C acc = C(0);
        for (int64_t k = 0; k < K; ++k)
          if (rows[k] >= 0 && (gn == 1 || pv.row_expert[rows[k]] == e)) acc += load_as<C>(dgs + rows[k] * dg + c);
        store_as(dgate + t * gn * dg + j, acc);
      }
  }
}

}  // namespace
}  // namespace uoe::cuda
