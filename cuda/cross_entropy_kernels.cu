// uoe::cuda cross-entropy kernels: targets checked on the device, lse in one online pass over the logits,
// the gradient in one pass; plus the op's device-side mean and per-row scale. Logits are stored as S (float,
// double or __nv_bfloat16) and computed in compute_t<S> (bfloat16: float32 loss, lse and scale).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/rowwise_common.cuh"
#include "ops/kernels/rowwise.h"
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

// ---- launchers ---------------------------------------------------------------------------------------------
// Target check (+ the writing kernel `launch`, skipped on the device when a target is bad), then one copy back.
template <class F>
TargetCheck checked_launch(const char* op, int64_t rows, int64_t vocab, const int64_t* targets, int64_t ignore_index,
                           F&& launch) {
  const LaunchContext l = launch_context(op);
  DeviceBuffer flag(l.device, 3 * sizeof(int64_t));
  int64_t* d = flag.get<int64_t>();
  ce_check_kernel<<<1, kCheckThreads, 0, l.stream>>>(rows, vocab, targets, ignore_index, d);
  check_launch(op);
  if (vocab > 0) {
    launch(l, d);
    check_launch(op);
  }
  int64_t h[3] = {0, -1, 0};
  UOE_CUDA_CHECK(op, cudaMemcpyAsync(h, d, sizeof(h), cudaMemcpyDeviceToHost, l.stream));
  UOE_CUDA_CHECK(op, cudaStreamSynchronize(l.stream));
  return TargetCheck{h[0], h[1], h[2]};
}

void throw_bad_target(const char* fn, const TargetCheck& c, int64_t vocab, int64_t ignore_index) {
  throw std::out_of_range(std::string("uoe::cuda::") + fn + ": target " + std::to_string(c.bad_target) +
                          " at row " + std::to_string(c.bad_row) + " is out of range for vocab size " +
                          std::to_string(vocab) + " (valid: [0, " + std::to_string(vocab) + ") or ignore_index " +
                          std::to_string(ignore_index) + ")");
}

}  // namespace

namespace {

// The launchers on storage S (loss, lse and scale in compute_t<S>).
template <class S, class T = compute_t<S>>
TargetCheck forward_checked(int64_t rows, int64_t vocab, const S* logits, const int64_t* targets,
                            int64_t ignore_index, T* loss_per_row, T* lse) {
  if (rows <= 0) return {};
  return checked_launch("cross_entropy", rows, vocab, targets, ignore_index, [&](const LaunchContext& l, const int64_t* d) {
    dispatch_rows<S>(vocab, {logits}, [&](auto v, auto tpr) {
      constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
      ce_fwd_kernel<S, V, TPR><<<grid_for<TPR>(rows), Group<TPR>::kBlock, 0, l.stream>>>(
          rows, vocab, logits, targets, ignore_index, d, loss_per_row, lse);
    });
  });
}

template <class S, class T = compute_t<S>>
void backward(int64_t rows, int64_t vocab, const S* logits, const int64_t* targets, int64_t ignore_index,
              const T* lse, const T* grad_scale_per_row, S* dlogits) {
  if (rows <= 0) return;
  const TargetCheck c = checked_launch(
      "cross_entropy backward", rows, vocab, targets, ignore_index, [&](const LaunchContext& l, const int64_t* d) {
        dispatch_rows<S>(vocab, {logits, dlogits}, [&](auto v, auto tpr) {
          constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
          ce_bwd_kernel<S, V, TPR><<<grid_for<TPR>(rows), Group<TPR>::kBlock, 0, l.stream>>>(
              rows, vocab, logits, targets, ignore_index, d, lse, grad_scale_per_row, dlogits);
        });
      });
  if (c.bad_row >= 0) throw_bad_target("cross_entropy_backward", c, vocab, ignore_index);
}

const __nv_bfloat16* nv(const BFloat16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* nv(BFloat16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

template <class T>
TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                                          int64_t ignore_index, T* loss_per_row, T* lse) {
  return forward_checked(rows, vocab, logits, targets, ignore_index, loss_per_row, lse);
}

template <class T>
void cross_entropy_forward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                           int64_t ignore_index, T* loss_per_row, T* lse) {
  const TargetCheck c =
      cross_entropy_forward_checked<T>(rows, vocab, logits, targets, ignore_index, loss_per_row, lse);
  if (c.bad_row >= 0) throw_bad_target("cross_entropy_forward", c, vocab, ignore_index);
}

template <class T>
void cross_entropy_backward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                            int64_t ignore_index, const T* lse, const T* grad_scale_per_row, T* dlogits) {
  backward(rows, vocab, logits, targets, ignore_index, lse, grad_scale_per_row, dlogits);
}

TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,
                                          int64_t ignore_index, float* loss_per_row, float* lse) {
  return forward_checked(rows, vocab, nv(logits), targets, ignore_index, loss_per_row, lse);
}

void cross_entropy_backward(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,
                            int64_t ignore_index, const float* lse, const float* grad_scale_per_row,
                            BFloat16* dlogits) {
  backward(rows, vocab, nv(logits), targets, ignore_index, lse, grad_scale_per_row, nv(dlogits));
}

template <class T>
void cross_entropy_mean_loss(int64_t rows, const T* loss_per_row, int64_t count, T* loss) {
  const LaunchContext l = launch_context("cross_entropy");
  ce_mean_kernel<T><<<1, 256, 0, l.stream>>>(std::max<int64_t>(rows, 0), loss_per_row, count, loss);
  check_launch("cross_entropy");
}

template <class T>
void cross_entropy_row_scale(int64_t rows, const T* g, int64_t count, T* scale) {
  if (rows <= 0) return;
  const LaunchContext l = launch_context("cross_entropy backward");
  const unsigned blocks = unsigned(std::min<int64_t>((rows + 255) / 256, 4096));
  ce_scale_kernel<T><<<blocks, 256, 0, l.stream>>>(rows, g, count, scale);
  check_launch("cross_entropy backward");
}

UOE_ROWWISE_INSTANTIATE_CROSS_ENTROPY(float)
UOE_ROWWISE_INSTANTIATE_CROSS_ENTROPY(double)

}  // namespace uoe::cuda
