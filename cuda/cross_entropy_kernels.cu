// uoe::cuda cross entropy: the launch of the kernels of cuda/cross_entropy_kernels.cuh (targets checked on the
// device, one copy of the check back), for logits stored as S (float, double or __nv_bfloat16) and computed in
// compute_t<S> (bfloat16: float32 loss, lse and scale).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "cuda/cross_entropy_kernels.cuh"
#include "cuda/rowwise_launch.cuh"
#include "ops/kernels/rowwise.h"

namespace uoe::cuda {
namespace {

using namespace rowwise;

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
