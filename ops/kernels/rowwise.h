// The rowwise kernel family, one declaration list for both backends: softmax, log_softmax, rms_norm, layer_norm and
// cross entropy with integer targets, forward + backward, on pointers. Implemented in ops/cpu/rowwise_kernels.cpp
// (host pointers) and cuda/rowwise_kernels.cu + cuda/cross_entropy_kernels.cu (device pointers of the current CUDA
// device, asynchronous on cuda::current_stream); a build without CUDA links stubs that raise (cuda/stub/). Callers
// pick the backend with UOE_KERNEL (ops/backend.h).
//
// Conventions shared by every kernel below:
//  * x, y, dy, dx, logits, dlogits are contiguous row-major [rows, n] (n = vocab for cross entropy); per-row
//    statistics (rstd, mean, lse, loss_per_row, grad_scale_per_row) are [rows]; weight, bias, dweight, dbias are
//    [n]. Outputs are overwritten, never accumulated into. rows == 0 or n == 0: nothing is written (cross entropy
//    still checks the targets).
//  * The templates exist for T = float and T = double; cross entropy also reads bfloat16 logits (an overload,
//    computed in float32: loss, lse and scale in float32, dlogits rounded once), and on the CPU the row kernels
//    have bfloat16 overloads too (below the list).
//  * An output may be the very same pointer as an input of the same shape (in place: y == x, dx == dy,
//    dlogits == logits); partially overlapping buffers are not allowed.
//  * Deterministic: results never depend on the thread count, grid or timing. CPU: OpenMP over rows, a row always
//    computed by the same code in the same order, norm weight/bias gradients summed over fixed row chunks (a
//    function of `rows` only) in chunk order. GPU: a warp per short row, a block per long one, tree reductions
//    whose order depends on the shape (and the pointers' 16-byte alignment) alone; no atomics. The backends differ
//    by rounding only.
//  * Float paths: the CPU's are vectorised (AVX-512 / AVX2 / SSE2 picked at run time) with uoe::cpu::vm math and
//    flush probabilities below FLT_MIN to 0 in softmax / log_softmax / cross entropy; the GPU's compute max and
//    sum-of-exp in one pass (online rescaling) and do not flush.
//  * Non-finite inputs: like PyTorch, a row whose entries are all -inf (or that contains +inf / NaN) gives NaN in
//    softmax / log_softmax / cross entropy; isolated -inf entries are fine (probability 0).
#pragma once
#include <cstdint>

#include "core/half.h"

namespace uoe::kernels {

// A cross-entropy target check: how many targets are counted (!= ignore_index), and the first bad row (-1: none)
// with its target.
struct TargetCheck {
  int64_t count = 0;
  int64_t bad_row = -1;
  int64_t bad_target = 0;
};

}  // namespace uoe::kernels

#define UOE_ROWWISE_KERNELS                                                                                        \
  using kernels::TargetCheck;                                                                                      \
  /* ---- softmax, log_softmax over the last dimension                                   x, y, dy, dx: [rows, n] */ \
  /* y = exp(x - max) / sum exp(x - max) */                                                                       \
  template <class T>                                                                                               \
  void softmax_forward(int64_t rows, int64_t n, const T* x, T* y);                                                 \
  /* dx = y * (dy - sum_j dy_j y_j) */                                                                             \
  template <class T>                                                                                               \
  void softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx);                                  \
  /* y = (x - max) - log(sum exp(x - max)) */                                                                      \
  template <class T>                                                                                               \
  void log_softmax_forward(int64_t rows, int64_t n, const T* x, T* y);                                             \
  /* dx = dy - exp(y) * sum_j dy_j */                                                                              \
  template <class T>                                                                                               \
  void log_softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx);                              \
  /* ---- RMSNorm: rstd = 1 / sqrt(mean(x^2) + eps); y = x * rstd * weight. weight: [n] or null; rstd: [rows] or    \
     null (inference). */                                                                                          \
  template <class T>                                                                                               \
  void rms_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, double eps, T* y, T* rstd);           \
  /* dx = rstd * (g - x * rstd^2 * mean(g * x)), g = dy * weight; dweight = sum_rows dy * x * rstd. weight may be  \
     null (then g = dy), dweight may be null (not computed); rstd from the forward. */                             \
  template <class T>                                                                                               \
  void rms_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* rstd, const T* dy, T* dx,  \
                         T* dweight);                                                                              \
  /* ---- LayerNorm: mean = mean(x); rstd = 1 / sqrt(mean((x - mean)^2) + eps) (biased variance, two-pass);        \
     y = (x - mean) * rstd * weight + bias. weight, bias: [n] or null; mean, rstd: [rows] or null. */              \
  template <class T>                                                                                               \
  void layer_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, const T* bias, double eps, T* y,   \
                          T* mean, T* rstd);                                                                       \
  /* xhat = (x - mean) * rstd, g = dy * weight: dx = rstd * (g - mean(g) - xhat * mean(g * xhat));                 \
     dweight = sum_rows dy * xhat, dbias = sum_rows dy (each may be null). */                                      \
  template <class T>                                                                                               \
  void layer_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* mean, const T* rstd,     \
                           const T* dy, T* dx, T* dweight, T* dbias);                                              \
  /* ---- cross entropy with integer targets                          logits, dlogits: [rows, vocab]; targets: [rows] \
     lse[r] = log sum_j exp(logits[r, j]) (every row, ignored ones included); loss_per_row[r] = lse[r] -           \
     logits[r, targets[r]], or 0 where targets[r] == ignore_index. Throws std::out_of_range (naming the backend,   \
     the row, the target and vocab) if a target other than ignore_index is outside [0, vocab); nothing is written  \
     then. vocab must be >= 1 when rows > 0. */                                                                    \
  template <class T>                                                                                               \
  void cross_entropy_forward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,                 \
                             int64_t ignore_index, T* loss_per_row, T* lse);                                       \
  /* cross_entropy_forward that reports a bad target instead of throwing (nothing is written then) and counts the  \
     targets; on a GPU one copy of three numbers back, the only synchronisation. */                                \
  template <class T>                                                                                               \
  TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,  \
                                            int64_t ignore_index, T* loss_per_row, T* lse);                        \
  TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const BFloat16* logits,                   \
                                            const int64_t* targets, int64_t ignore_index, float* loss_per_row,     \
                                            float* lse);                                                           \
  /* dlogits[r, :] = (softmax(logits[r, :]) - onehot(targets[r])) * grad_scale_per_row[r], as exp(logits - lse) in \
     one pass; zeros on ignored rows. grad_scale_per_row[r] = d loss / d loss_per_row[r]. Same target check and    \
     exception as the forward. */                                                                                  \
  template <class T>                                                                                               \
  void cross_entropy_backward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,                \
                              int64_t ignore_index, const T* lse, const T* grad_scale_per_row, T* dlogits);        \
  void cross_entropy_backward(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,         \
                              int64_t ignore_index, const float* lse, const float* grad_scale_per_row,             \
                              BFloat16* dlogits);                                                                  \
  /* loss[0] = T(sum_r double(loss_per_row[r]) / count) summed in a fixed order, or 0 when count == 0. */          \
  template <class T>                                                                                               \
  void cross_entropy_mean_loss(int64_t rows, const T* loss_per_row, int64_t count, T* loss);                       \
  /* scale[r] = T(double(g[0]) / count) for every r < rows, or 0 when count == 0 (g: one number in the kernel's    \
     memory, so a GPU's never comes back to the host). */                                                          \
  template <class T>                                                                                               \
  void cross_entropy_row_scale(int64_t rows, const T* g, int64_t count, T* scale);

namespace uoe::cpu {
UOE_ROWWISE_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_ROWWISE_KERNELS
}  // namespace uoe::cuda

#undef UOE_ROWWISE_KERNELS

// bfloat16 rows on the CPU (a GPU computes them in float32 through the op layer): the kernels above with x, y, dy,
// dx, weight and bias in bfloat16, read into float32 registers, every result rounded once; the per-row statistics
// (rstd, mean) and the norm parameter gradients in float32. Same contracts, and the same float32 arithmetic as the
// float instantiation on the widened values, so the results are that float path's, rounded once.
namespace uoe::cpu {
void softmax_forward(int64_t rows, int64_t n, const BFloat16* x, BFloat16* y);
void softmax_backward(int64_t rows, int64_t n, const BFloat16* y, const BFloat16* dy, BFloat16* dx);
void log_softmax_forward(int64_t rows, int64_t n, const BFloat16* x, BFloat16* y);
void log_softmax_backward(int64_t rows, int64_t n, const BFloat16* y, const BFloat16* dy, BFloat16* dx);
void rms_norm_forward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, double eps, BFloat16* y,
                      float* rstd);
void rms_norm_backward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, const float* rstd,
                       const BFloat16* dy, BFloat16* dx, float* dweight);
void layer_norm_forward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, const BFloat16* bias,
                        double eps, BFloat16* y, float* mean, float* rstd);
void layer_norm_backward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, const float* mean,
                         const float* rstd, const BFloat16* dy, BFloat16* dx, float* dweight, float* dbias);
}  // namespace uoe::cpu

// The explicit instantiations of the templates above for one T (float, double), for the files that define them
// (ops/cpu/, cuda/ and cuda/stub/): the row kernels, and cross entropy.
#define UOE_ROWWISE_INSTANTIATE_ROWS(T)                                                                          \
  template void softmax_forward<T>(int64_t, int64_t, const T*, T*);                                            \
  template void softmax_backward<T>(int64_t, int64_t, const T*, const T*, T*);                                 \
  template void log_softmax_forward<T>(int64_t, int64_t, const T*, T*);                                        \
  template void log_softmax_backward<T>(int64_t, int64_t, const T*, const T*, T*);                             \
  template void rms_norm_forward<T>(int64_t, int64_t, const T*, const T*, double, T*, T*);                     \
  template void rms_norm_backward<T>(int64_t, int64_t, const T*, const T*, const T*, const T*, T*, T*);        \
  template void layer_norm_forward<T>(int64_t, int64_t, const T*, const T*, const T*, double, T*, T*, T*);     \
  template void layer_norm_backward<T>(int64_t, int64_t, const T*, const T*, const T*, const T*, const T*, T*, \
                                       T*, T*);
#define UOE_ROWWISE_INSTANTIATE_CROSS_ENTROPY(T)                                                                 \
  template void cross_entropy_forward<T>(int64_t, int64_t, const T*, const int64_t*, int64_t, T*, T*);        \
  template TargetCheck cross_entropy_forward_checked<T>(int64_t, int64_t, const T*, const int64_t*, int64_t,   \
                                                        T*, T*);                                               \
  template void cross_entropy_backward<T>(int64_t, int64_t, const T*, const int64_t*, int64_t, const T*,      \
                                          const T*, T*);                                                       \
  template void cross_entropy_mean_loss<T>(int64_t, const T*, int64_t, T*);                                    \
  template void cross_entropy_row_scale<T>(int64_t, const T*, int64_t, T*);
