// The CUDA MoE routing kernels (launched by cuda/moe_routing.cu; run on the CPU by uoe_cuda_emu_tests): top-k / top-p
// routing forward and backward, one thread per token as the CPU computes it, and the group L2 norm.
#pragma once
#include <cmath>
#include <cstdint>

#include "cuda/storage_access.cuh"
#include "ops/kernels/moe.h"

namespace uoe::cuda {
namespace {

// ---- routing ----------------------------------------------------------------------------------------------
// Ranking of experts: higher score first, NaN before any number, ties by lower index (a strict total order).
template <typename T>
__device__ __forceinline__ bool ranks_before(const T* row, int64_t a, int64_t b) {
  const T va = row[a], vb = row[b];
  const bool na = isnan(va), nb = isnan(vb);
  if (na || nb) return na && (!nb || a < b);
  if (va != vb) return va > vb;
  return a < b;
}

// One thread per token. The j-th pick is the best expert ranked after the (j-1)-th pick, which is the CPU's
// partial sort under a strict total order. Softmax in double, every expression as on the CPU.
template <typename T>
__global__ void route_forward_kernel(RouteSpec s, const T* scores, int64_t* indices, T* weights, T* probs) {
  const int64_t n = s.n, K = s.K;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < s.T; t += int64_t(gridDim.x) * blockDim.x) {
    const T* row = scores + t * n;
    int64_t* idx = indices + t * K;
    int64_t prev = -1;
    for (int64_t j = 0; j < K; ++j) {
      int64_t best = -1;
      for (int64_t i = 0; i < n; ++i) {
        if (prev >= 0 && !ranks_before(row, prev, i)) continue;  // already picked
        if (best < 0 || ranks_before(row, i, best)) best = i;
      }
      idx[j] = best;
      prev = best;
    }
    double mx = -INFINITY;  // std::max semantics: a NaN score never becomes the max
    for (int64_t i = 0; i < n; ++i) {
      const double v = double(row[i]);
      mx = mx < v ? v : mx;
    }
    double z = 0;
    for (int64_t i = 0; i < n; ++i) z += exp(double(row[i]) - mx);
    if (probs)
      for (int64_t i = 0; i < n; ++i) probs[t * n + i] = T(exp(double(row[i]) - mx) / z);
    int64_t c = K;  // number of selected experts
    if (s.p >= 0) {
      double cum = 0;
      for (c = 0; c < K;) {
        cum += exp(double(row[idx[c]]) - mx) / z;
        ++c;
        if (cum > s.p) break;
      }
    }
    double zs = 0;
    for (int64_t j = 0; j < c; ++j) zs += exp(double(row[idx[j]]) - mx);
    for (int64_t j = 0; j < K; ++j) {
      const int64_t i = idx[j];
      weights[t * K + j] = j < c ? T(exp(double(row[i]) - mx) / (s.full_softmax ? z : zs)) : T(0);
      if (j >= c) idx[j] = -1;
    }
  }
}

template <typename T>
__global__ void route_backward_kernel(RouteSpec s, const int64_t* indices, const T* weights, const T* probs,
                                      const T* dweights, T* dscores) {
  const int64_t n = s.n, K = s.K;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < s.T; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t* idx = indices + t * K;
    const T *w = weights + t * K, *dw = dweights + t * K;
    T* ds = dscores + t * n;
    double dot = 0;  // sum_k w_k dw_k
    for (int64_t k = 0; k < K; ++k)
      if (idx[k] >= 0) dot += double(w[k]) * double(dw[k]);
    if (s.full_softmax) {
      const T* p = probs + t * n;
      for (int64_t i = 0; i < n; ++i) ds[i] = T(-double(p[i]) * dot);
      for (int64_t k = 0; k < K; ++k)  // + p_i dp_i
        if (idx[k] >= 0) ds[idx[k]] = T(double(ds[idx[k]]) + double(p[idx[k]]) * double(dw[k]));
    } else {
      for (int64_t i = 0; i < n; ++i) ds[i] = T(0);
      for (int64_t k = 0; k < K; ++k)
        if (idx[k] >= 0) ds[idx[k]] = T(double(ds[idx[k]]) + double(w[k]) * (double(dw[k]) - dot));
    }
  }
}

// ---- group L2 norm ----------------------------------------------------------------------------------------
// h stored as S (float, double, or bfloat16 computed in float), norms in T.
template <typename S, typename T>
__global__ void group_l2norm_forward_kernel(int64_t count, int64_t r, const S* h, T* norm) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    const S* v = h + i * r;
    double acc = 0;
    for (int64_t j = 0; j < r; ++j) {
      const double x = double(load_as<compute_t<S>>(v + j));
      acc += x * x;
    }
    norm[i] = T(sqrt(acc));
  }
}

template <typename S, typename T>
__global__ void group_l2norm_backward_kernel(int64_t count, int64_t r, const S* h, const T* norm, const T* dnorm,
                                             S* dh) {
  for (int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; e < count; e += int64_t(gridDim.x) * blockDim.x) {
    const int64_t i = e / r;
    const T scale = norm[i] == T(0) ? T(0) : dnorm[i] / norm[i];
    store_as(dh + e, load_as<compute_t<S>>(h + e) * scale);
  }
}

}  // namespace
}  // namespace uoe::cuda
