// uoe::cuda row-wise kernels (softmax, log_softmax, rms_norm, layer_norm, cross_entropy): the CPU kernels of
// ops/cpu/rowwise_kernels.h name for name and signature for signature, on device pointers
// (cuda/rowwise_kernels.cu; cross entropy in cuda/cross_entropy_kernels.cu).
#pragma once

#include <cstdint>

#include "core/half.h"

// Same conventions as ops/cpu/rowwise_kernels.h (read that header first); what differs on the GPU:
//  * Every pointer is device memory of the current CUDA device (cudaGetDevice); kernels run asynchronously on
//    cuda::current_stream(device). Only the cross-entropy calls synchronise (to read the target check back).
//  * One warp per row for short rows, one block per row for long ones; 16-byte vector loads when n and every
//    pointer allow it. Row sums are tree reductions (warp shuffles), so results differ from the CPU by rounding
//    only, but they are deterministic: the order depends on the shape (and on whether the pointers are 16-byte
//    aligned) alone, never on timing.
//  * softmax / log_softmax / cross entropy compute max and sum-of-exp in one pass (online rescaling). Rows that
//    are all -inf, or contain +inf or NaN, give NaN exactly as on the CPU; isolated -inf entries give 0.
//    Probabilities below FLT_MIN are not flushed to zero (the CPU float path flushes them).
//  * Norm weight / bias gradients: rows are cut into fixed chunks (a function of `rows` only); a group of threads
//    walks its chunk in row order and accumulates per-column partials, which are then summed in a fixed order.
//    No atomics.
//  * Cross entropy: targets are checked on the device (count of counted rows, first bad row); the kernels that
//    write are skipped when a target is bad, so nothing is written, then the result is copied back and
//    std::out_of_range is thrown with the CPU kernel's message (naming uoe::cuda:: instead of uoe::cpu::).
namespace uoe::cuda {

template <class T>
void softmax_forward(int64_t rows, int64_t n, const T* x, T* y);
template <class T>
void softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx);
template <class T>
void log_softmax_forward(int64_t rows, int64_t n, const T* x, T* y);
template <class T>
void log_softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx);
template <class T>
void rms_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, double eps, T* y, T* rstd);
template <class T>
void rms_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* rstd, const T* dy, T* dx,
                       T* dweight);
template <class T>
void layer_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, const T* bias, double eps, T* y,
                        T* mean, T* rstd);
template <class T>
void layer_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dweight, T* dbias);
template <class T>
void cross_entropy_forward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                           int64_t ignore_index, T* loss_per_row, T* lse);
template <class T>
void cross_entropy_backward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                            int64_t ignore_index, const T* lse, const T* grad_scale_per_row, T* dlogits);

// ---- CUDA-only helpers of the cross-entropy op (no CPU twin: the CPU op does these on the host) ------------
// The target check's result: how many targets are counted (!= ignore_index), and the first bad row (-1: none)
// with its target.
struct TargetCheck {
  int64_t count = 0;
  int64_t bad_row = -1;
  int64_t bad_target = 0;
};
// cross_entropy_forward that reports a bad target instead of throwing (nothing is written then) and also
// returns the count; one device-to-host copy of three numbers, the only synchronisation.
template <class T>
TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                                          int64_t ignore_index, T* loss_per_row, T* lse);
// The same on bfloat16 logits and logit gradients, computed in float32: loss, lse and scale in float32.
TargetCheck cross_entropy_forward_checked_bf16(int64_t rows, int64_t vocab, const BFloat16* logits,
                                               const int64_t* targets, int64_t ignore_index, float* loss_per_row,
                                               float* lse);
void cross_entropy_backward_bf16(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,
                                 int64_t ignore_index, const float* lse, const float* grad_scale_per_row,
                                 BFloat16* dlogits);
// loss[0] = T(sum_r double(loss_per_row[r]) / count), or 0 when count == 0 (one block, fixed order; no sync).
template <class T>
void cross_entropy_mean_loss(int64_t rows, const T* loss_per_row, int64_t count, T* loss);
// scale[r] = T(double(g[0]) / count) for every r < rows, or 0 when count == 0 (g: a device scalar; no sync).
template <class T>
void cross_entropy_row_scale(int64_t rows, const T* g, int64_t count, T* scale);

#define UOE_CUDA_ROWWISE_EXTERN(T)                                                                              \
  extern template void softmax_forward<T>(int64_t, int64_t, const T*, T*);                                     \
  extern template void softmax_backward<T>(int64_t, int64_t, const T*, const T*, T*);                          \
  extern template void log_softmax_forward<T>(int64_t, int64_t, const T*, T*);                                 \
  extern template void log_softmax_backward<T>(int64_t, int64_t, const T*, const T*, T*);                      \
  extern template void rms_norm_forward<T>(int64_t, int64_t, const T*, const T*, double, T*, T*);              \
  extern template void rms_norm_backward<T>(int64_t, int64_t, const T*, const T*, const T*, const T*, T*, T*); \
  extern template void layer_norm_forward<T>(int64_t, int64_t, const T*, const T*, const T*, double, T*, T*,   \
                                             T*);                                                              \
  extern template void layer_norm_backward<T>(int64_t, int64_t, const T*, const T*, const T*, const T*,        \
                                              const T*, T*, T*, T*);                                           \
  extern template void cross_entropy_forward<T>(int64_t, int64_t, const T*, const int64_t*, int64_t, T*, T*); \
  extern template void cross_entropy_backward<T>(int64_t, int64_t, const T*, const int64_t*, int64_t,          \
                                                 const T*, const T*, T*);                                      \
  extern template TargetCheck cross_entropy_forward_checked<T>(int64_t, int64_t, const T*, const int64_t*,     \
                                                               int64_t, T*, T*);                               \
  extern template void cross_entropy_mean_loss<T>(int64_t, const T*, int64_t, T*);                             \
  extern template void cross_entropy_row_scale<T>(int64_t, const T*, int64_t, T*);
UOE_CUDA_ROWWISE_EXTERN(float)
UOE_CUDA_ROWWISE_EXTERN(double)
#undef UOE_CUDA_ROWWISE_EXTERN

}  // namespace uoe::cuda
