// The CUDA cross-entropy kernels (launched by cuda/cross_entropy_kernels.cu; run on the CPU by uoe_cuda_emu_tests):
// the target check, lse and the loss in one online pass over the logits, the gradient in one pass, the mean and the
// per-row scale. Logits stored as S, computed in compute_t<S>.
#pragma once
#include <cstdint>

#include "cuda/rowwise_device.cuh"
#include "cuda/storage_access.cuh"

namespace uoe::cuda {
namespace {

using namespace rowwise;

// ---- cross entropy ----------------------------------------------------------------------------------------
constexpr int kCheckThreads = 512;
// One block: out = {count of targets != ignore_index, first bad row or -1, that row's target}.
__global__ void __launch_bounds__(kCheckThreads)
    ce_check_kernel(int64_t rows, int64_t vocab, const int64_t* targets, int64_t ignore_index, int64_t* out) {
  int64_t count = 0, bad = rows;
  for (int64_t r = threadIdx.x; r < rows; r += kCheckThreads) {
    const int64_t t = targets[r];
    if (t == ignore_index) continue;
    ++count;
    if ((t < 0 || t >= vocab) && r < bad) bad = r;
  }
  count = group_allreduce<kCheckThreads>(count, Plus{}, int64_t(0));
  bad = group_allreduce<kCheckThreads>(bad, Min{}, rows);
  if (threadIdx.x == 0) {
    out[0] = count;
    out[1] = bad < rows ? bad : -1;
    out[2] = bad < rows ? targets[bad] : 0;
  }
}

// lse[r] = m + log(sum exp(x - m)) in one pass; loss[r] = lse[r] - x[r, t]. Nothing is written when check[1] >= 0.
template <class S, int V, int TPR, class T = compute_t<S>>
__global__ void __launch_bounds__(Group<TPR>::kBlock)
    ce_fwd_kernel(int64_t rows, int64_t vocab, const S* logits, const int64_t* targets, int64_t ignore_index,
                  const int64_t* check, T* loss, T* lse) {
  using G = Group<TPR>;
  using W = Vec<S, V>;
  if (check[1] >= 0) return;
  const int64_t nv = vocab / V;
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const S* x = logits + r * vocab;
    const W* xr = reinterpret_cast<const W*>(x);
    Online<T> st{neg_inf<T>(), T(0)};
#pragma unroll 4
    for (int64_t i = G::lane(); i < nv; i += TPR) online_add(st, widen<T>(xr[i]));
    st = finalize(group_allreduce<TPR>(st, Merge{}, Online<T>{neg_inf<T>(), T(0)}));
    if (G::lane() == 0) {
      const T l = st.m + dlog(st.s);
      lse[r] = l;
      const int64_t t = targets[r];
      loss[r] = t == ignore_index ? T(0) : l - load_as<T>(x + t);
    }
  }
}

// dlogits = exp(logits - lse) * scale, minus scale at the target; zeros on ignored rows. Skipped when check[1] >= 0.
template <class S, int V, int TPR, class T = compute_t<S>>
__global__ void __launch_bounds__(Group<TPR>::kBlock)
    ce_bwd_kernel(int64_t rows, int64_t vocab, const S* logits, const int64_t* targets, int64_t ignore_index,
                  const int64_t* check, const T* lse, const T* scale, S* dlogits) {
  using G = Group<TPR>;
  using W = Vec<S, V>;
  if (check[1] >= 0) return;
  const int64_t nv = vocab / V;
  for (int64_t r = G::first(); r < rows; r += G::stride()) {
    const W* xr = reinterpret_cast<const W*>(logits + r * vocab);
    W* dr = reinterpret_cast<W*>(dlogits + r * vocab);
    const int64_t t = targets[r];
    if (t == ignore_index) {
      for (int64_t i = G::lane(); i < nv; i += TPR) dr[i] = narrow<S>(Vec<T, V>{});
      continue;
    }
    const T l = lse[r], g = scale[r];
#pragma unroll 4
    for (int64_t i = G::lane(); i < nv; i += TPR) {
      Vec<T, V> a = widen<T>(xr[i]);
#pragma unroll
      for (int k = 0; k < V; ++k) {
        a.v[k] = dexp(a.v[k] - l) * g;
        if (i * V + k == t) a.v[k] -= g;
      }
      dr[i] = narrow<S>(a);
    }
  }
}

// loss[0] = sum(loss_per_row) / count in double, one block in a fixed order.
template <class T>
__global__ void __launch_bounds__(256) ce_mean_kernel(int64_t rows, const T* per_row, int64_t count, T* loss) {
  double acc = 0;
  for (int64_t r = threadIdx.x; r < rows; r += 256) acc += double(per_row[r]);
  acc = group_allreduce<256>(acc, Plus{}, 0.0);
  if (threadIdx.x == 0) loss[0] = T(count > 0 ? acc / double(count) : 0.0);
}

template <class T>
__global__ void ce_scale_kernel(int64_t rows, const T* g, int64_t count, T* scale) {
  const T s = T(count > 0 ? double(g[0]) / double(count) : 0.0);
  for (int64_t r = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; r < rows; r += int64_t(gridDim.x) * blockDim.x)
    scale[r] = s;
}

}  // namespace
}  // namespace uoe::cuda
