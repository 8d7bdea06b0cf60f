// The CUDA row kernels (launched by cuda/rowwise_kernels.cu; run on the CPU by uoe_cuda_emu_tests): softmax,
// log_softmax, RMSNorm and LayerNorm forward and backward, one warp or one block per row (Group<TPR>), V elements per
// 16-byte access; the norms' parameter gradients as per-chunk partial rows, summed by reduce_chunks_kernel.
#pragma once
#include <cstdint>

#include "cuda/rowwise_device.cuh"

namespace uoe::cuda {
namespace {

using namespace rowwise;

// ---- softmax / log_softmax --------------------------------------------------------------------------------
template <class T, int V, int TPR, bool LOG>
__global__ void __launch_bounds__(Group<TPR>::kBlock) softmax_fwd_kernel(int64_t rows, int64_t n, const T* x, T* y) {
  using G = Group<TPR>;
  using W = Vec<T, V>;
  const int64_t nv = n / V;
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const W* xr = reinterpret_cast<const W*>(x + r * n);
    W* yr = reinterpret_cast<W*>(y + r * n);
    Online<T> st{neg_inf<T>(), T(0)};
#pragma unroll 4
    for (int64_t i = G::lane(); i < nv; i += TPR) online_add(st, xr[i]);
    st = finalize(group_allreduce<TPR>(st, Merge{}, Online<T>{neg_inf<T>(), T(0)}));
    const T m = st.m, log_s = dlog(st.s), inv = T(1) / st.s;
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      W w = xr[i];
#pragma unroll
      for (int k = 0; k < V; ++k) w.v[k] = LOG ? (w.v[k] - m) - log_s : dexp(w.v[k] - m) * inv;
      yr[i] = w;
    }
  }
}

// softmax:  dx = y * (dy - sum_j dy_j y_j);   log_softmax:  dx = dy - exp(y) * sum_j dy_j
template <class T, int V, int TPR, bool LOG>
__global__ void __launch_bounds__(Group<TPR>::kBlock)
    softmax_bwd_kernel(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  using G = Group<TPR>;
  using W = Vec<T, V>;
  const int64_t nv = n / V;
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const W *yr = reinterpret_cast<const W*>(y + r * n), *dyr = reinterpret_cast<const W*>(dy + r * n);
    W* dxr = reinterpret_cast<W*>(dx + r * n);
    T acc = 0;
#pragma unroll 4
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      const W g = dyr[i];
      if constexpr (LOG) {
#pragma unroll
        for (int k = 0; k < V; ++k) acc += g.v[k];
      } else {
        const W yy = yr[i];
#pragma unroll
        for (int k = 0; k < V; ++k) acc += g.v[k] * yy.v[k];
      }
    }
    const T s = group_sum<TPR>(acc);
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      const W yy = yr[i], g = dyr[i];
      W o;
#pragma unroll
      for (int k = 0; k < V; ++k) o.v[k] = LOG ? g.v[k] - dexp(yy.v[k]) * s : yy.v[k] * (g.v[k] - s);
      dxr[i] = o;
    }
  }
}

// ---- RMSNorm ----------------------------------------------------------------------------------------------
// w null: weight 1. rstd null: not stored.
template <class T, int V, int TPR>
__global__ void __launch_bounds__(Group<TPR>::kBlock)
    rms_fwd_kernel(int64_t rows, int64_t n, const T* x, const T* w, T eps, T* y, T* rstd) {
  using G = Group<TPR>;
  using W = Vec<T, V>;
  const int64_t nv = n / V;
  const W* wv = reinterpret_cast<const W*>(w);
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const W* xr = reinterpret_cast<const W*>(x + r * n);
    W* yr = reinterpret_cast<W*>(y + r * n);
    T acc = 0;
#pragma unroll 4
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      const W a = xr[i];
#pragma unroll
      for (int k = 0; k < V; ++k) acc += a.v[k] * a.v[k];
    }
    const T rs = T(1) / dsqrt(group_sum<TPR>(acc) / T(n) + eps);
    if (rstd && G::lane() == 0) rstd[r] = rs;
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      W a = xr[i];
      if (wv) {
        const W b = wv[i];
#pragma unroll
        for (int k = 0; k < V; ++k) a.v[k] = (a.v[k] * rs) * b.v[k];
      } else {
#pragma unroll
        for (int k = 0; k < V; ++k) a.v[k] = a.v[k] * rs;
      }
      yr[i] = a;
    }
  }
}

// A group handles rows [g * chunk, (g + 1) * chunk) in order; part (null: no dweight) is [groups, n] and the
// group's row of it is owned by its threads column by column, so accumulating needs no atomics.
template <class T, int V, int TPR>
__global__ void __launch_bounds__(Group<TPR>::kBlock)
    rms_bwd_kernel(int64_t rows, int64_t n, int64_t chunk, const T* x, const T* w, const T* rstd, const T* dy, T* dx,
                   T* part) {
  using G = Group<TPR>;
  using W = Vec<T, V>;
  const int64_t nv = n / V, groups = (rows + chunk - 1) / chunk;
  const W* wv = reinterpret_cast<const W*>(w);
  for (int64_t g = G::first(); g < groups; g += G::stride()) {
    const int64_t r0 = g * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    W* pw = part ? reinterpret_cast<W*>(part + g * n) : nullptr;
    for (int64_t r = r0; r < r1; ++r) {
      const W *xr = reinterpret_cast<const W*>(x + r * n), *dyr = reinterpret_cast<const W*>(dy + r * n);
      W* dxr = reinterpret_cast<W*>(dx + r * n);
      const T rs = rstd[r];
      T acc = 0;  // sum_j (dy_j w_j) x_j
#pragma unroll 4
      for (int64_t i = G::lane(); i < nv; i += TPR) {
        const W a = xr[i], d = dyr[i];
        const W b = wv ? wv[i] : W{};
#pragma unroll
        for (int k = 0; k < V; ++k) acc += (d.v[k] * (wv ? b.v[k] : T(1))) * a.v[k];
      }
      const T c = group_sum<TPR>(acc) * (rs * rs * rs) / T(n);
      for (int64_t i = G::lane(); i < nv; i += TPR) {
        const W a = xr[i], d = dyr[i];
        const W b = wv ? wv[i] : W{};
        W o, p;
        if (pw) p = r == r0 ? W{} : pw[i];
#pragma unroll
        for (int k = 0; k < V; ++k) {
          o.v[k] = rs * (d.v[k] * (wv ? b.v[k] : T(1))) - a.v[k] * c;
          if (pw) p.v[k] += d.v[k] * (a.v[k] * rs);
        }
        if (pw) pw[i] = p;
        dxr[i] = o;
      }
    }
  }
}

// ---- LayerNorm --------------------------------------------------------------------------------------------
template <class T, int V, int TPR>
__global__ void __launch_bounds__(Group<TPR>::kBlock) ln_fwd_kernel(int64_t rows, int64_t n, const T* x, const T* w,
                                                                    const T* b, T eps, T* y, T* mean, T* rstd) {
  using G = Group<TPR>;
  using W = Vec<T, V>;
  const int64_t nv = n / V;
  const W *wv = reinterpret_cast<const W*>(w), *bv = reinterpret_cast<const W*>(b);
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const W* xr = reinterpret_cast<const W*>(x + r * n);
    W* yr = reinterpret_cast<W*>(y + r * n);
    T acc = 0;
#pragma unroll 4
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      const W a = xr[i];
#pragma unroll
      for (int k = 0; k < V; ++k) acc += a.v[k];
    }
    const T mu = group_sum<TPR>(acc) / T(n);
    acc = 0;  // biased variance, second pass
#pragma unroll 4
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      const W a = xr[i];
#pragma unroll
      for (int k = 0; k < V; ++k) acc += (a.v[k] - mu) * (a.v[k] - mu);
    }
    const T rs = T(1) / dsqrt(group_sum<TPR>(acc) / T(n) + eps);
    if (G::lane() == 0) {
      if (mean) mean[r] = mu;
      if (rstd) rstd[r] = rs;
    }
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      W a = xr[i];
      const W ww = wv ? wv[i] : W{}, bb = bv ? bv[i] : W{};
#pragma unroll
      for (int k = 0; k < V; ++k) a.v[k] = ((a.v[k] - mu) * rs) * (wv ? ww.v[k] : T(1)) + (bv ? bb.v[k] : T(0));
      yr[i] = a;
    }
  }
}

// part (null: no parameter gradients) is [2, groups, n]: dweight partials, then dbias partials.
template <class T, int V, int TPR>
__global__ void __launch_bounds__(Group<TPR>::kBlock)
    ln_bwd_kernel(int64_t rows, int64_t n, int64_t chunk, const T* x, const T* w, const T* mean, const T* rstd,
                  const T* dy, T* dx, T* part) {
  using G = Group<TPR>;
  using W = Vec<T, V>;
  const int64_t nv = n / V, groups = (rows + chunk - 1) / chunk;
  const W* wv = reinterpret_cast<const W*>(w);
  for (int64_t g = G::first(); g < groups; g += G::stride()) {
    const int64_t r0 = g * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
    W* pw = part ? reinterpret_cast<W*>(part + g * n) : nullptr;
    W* pb = part ? reinterpret_cast<W*>(part + (groups + g) * n) : nullptr;
    for (int64_t r = r0; r < r1; ++r) {
      const W *xr = reinterpret_cast<const W*>(x + r * n), *dyr = reinterpret_cast<const W*>(dy + r * n);
      W* dxr = reinterpret_cast<W*>(dx + r * n);
      const T mu = mean[r], rs = rstd[r];
      T sg = 0, sgx = 0;  // sum g, sum g * xhat with g = dy * w
#pragma unroll 4
      for (int64_t i = G::lane(); i < nv; i += TPR) {
        const W a = xr[i], d = dyr[i];
        const W ww = wv ? wv[i] : W{};
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const T gk = d.v[k] * (wv ? ww.v[k] : T(1));
          sg += gk;
          sgx += gk * ((a.v[k] - mu) * rs);
        }
      }
      const T a_mean = group_sum<TPR>(sg) / T(n), c = group_sum<TPR>(sgx) / T(n);
      for (int64_t i = G::lane(); i < nv; i += TPR) {
        const W a = xr[i], d = dyr[i];
        const W ww = wv ? wv[i] : W{};
        W o, p, q;
        if (pw) {
          p = r == r0 ? W{} : pw[i];
          q = r == r0 ? W{} : pb[i];
        }
#pragma unroll
        for (int k = 0; k < V; ++k) {
          const T xhat = (a.v[k] - mu) * rs, dk = d.v[k];
          o.v[k] = rs * ((dk * (wv ? ww.v[k] : T(1)) - a_mean) - xhat * c);
          if (pw) {
            p.v[k] += dk * xhat;
            q.v[k] += dk;
          }
        }
        if (pw) {
          pw[i] = p;
          pb[i] = q;
        }
        dxr[i] = o;
      }
    }
  }
}

// out[j] = sum over c = 0..nc-1 of part[c * n + j]: 8 lanes per column each sum every 8th chunk in order, then
// the 8 lane sums are added in lane order (a fixed order for a given shape).    block (32, 8), grid ceil(n / 32)
template <class T>
__global__ void __launch_bounds__(256) reduce_chunks_kernel(int64_t nc, int64_t n, const T* part, T* out) {
  __shared__ T buf[8][33];
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const int64_t j = int64_t(blockIdx.x) * 32 + tx;
  T acc = 0;
  if (j < n)
    for (int64_t c = ty; c < nc; c += 8) acc += part[c * n + j];
  buf[ty][tx] = acc;
  __syncthreads();
  if (ty == 0 && j < n) {
    T s = buf[0][tx];
#pragma unroll
    for (int k = 1; k < 8; ++k) s += buf[k][tx];
    out[j] = s;
  }
}

}  // namespace
}  // namespace uoe::cuda
