// uoe::cpu row-wise kernels (softmax, log_softmax, rms_norm, layer_norm, cross_entropy), forward + backward.
#pragma once

#include <cstdint>

// Conventions shared by every kernel below:
//  * x, y, dy, dx, logits, dlogits are contiguous row-major [rows, n] (n = vocab for cross entropy);
//    per-row statistics (rstd, mean, lse, loss_per_row, grad_scale_per_row) are [rows]; weight, bias,
//    dweight, dbias are [n]. Outputs are overwritten, never accumulated into. rows == 0 or n == 0: nothing is
//    written (cross entropy still checks the targets).
//  * Instantiated for T = float and T = double only. The float paths use uoe::cpu::vm math and are
//    vectorised (AVX-512 / AVX2 / SSE2 picked at run time through target_clones). Float softmax / log_softmax /
//    cross-entropy use vm::exp_ftz: a probability below FLT_MIN (~1.2e-38) is returned as 0, not as a denormal.
//  * An output may be the very same pointer as an input of the same shape (in place: y == x, dx == dy,
//    dlogits == logits); partially overlapping buffers are not allowed.
//  * Threads: OpenMP over rows. Results are bit-identical whatever the thread count: a row is always computed
//    by the same code in the same order, and the norm weight/bias gradients are summed over fixed row chunks
//    (chunk size depends only on `rows`) whose partials are reduced in chunk order.
//  * Non-finite inputs: like PyTorch, a row whose entries are all -inf (or that contains +inf / NaN) gives NaN in
//    softmax / log_softmax / cross entropy; isolated -inf entries are fine (probability 0).
namespace uoe::cpu {

// ---- softmax over the last dimension ---------------------------------------------------------------------
// y = exp(x - max) / sum exp(x - max)                                         x, y: [rows, n]
template <class T>
void softmax_forward(int64_t rows, int64_t n, const T* x, T* y);
// dx = y * (dy - sum_j dy_j y_j)                                             y, dy, dx: [rows, n]
template <class T>
void softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx);

// ---- log_softmax ------------------------------------------------------------------------------------------
// y = (x - max) - log(sum exp(x - max))                                      x, y: [rows, n]
template <class T>
void log_softmax_forward(int64_t rows, int64_t n, const T* x, T* y);
// dx = dy - exp(y) * sum_j dy_j                                              y, dy, dx: [rows, n]
template <class T>
void log_softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx);

// ---- RMSNorm ----------------------------------------------------------------------------------------------
// rstd = 1 / sqrt(mean(x^2) + eps);  y = x * rstd * weight                   x, y: [rows, n]; weight: [n] or null
// rstd: [rows], may be null (inference).
template <class T>
void rms_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, double eps, T* y, T* rstd);
// dx = rstd * (g - x * rstd^2 * mean(g * x)), g = dy * weight;  dweight = sum_rows dy * x * rstd.
// weight may be null (then g = dy); dweight may be null (not computed).     rstd: [rows] from the forward
template <class T>
void rms_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* rstd, const T* dy, T* dx,
                       T* dweight);

// ---- LayerNorm --------------------------------------------------------------------------------------------
// mean = mean(x); rstd = 1 / sqrt(mean((x - mean)^2) + eps)  (biased variance, two-pass)
// y = (x - mean) * rstd * weight + bias                  weight, bias: [n] or null; mean, rstd: [rows] or null
template <class T>
void layer_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, const T* bias, double eps, T* y,
                        T* mean, T* rstd);
// xhat = (x - mean) * rstd, g = dy * weight:  dx = rstd * (g - mean(g) - xhat * mean(g * xhat))
// dweight = sum_rows dy * xhat, dbias = sum_rows dy (each may be null).
template <class T>
void layer_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dweight, T* dbias);

// ---- cross entropy with integer targets -------------------------------------------------------------------
// lse[r] = log sum_j exp(logits[r, j]) (computed for every row, ignored ones included);
// loss_per_row[r] = lse[r] - logits[r, targets[r]], or 0 where targets[r] == ignore_index.
// The caller reduces loss_per_row (sum / mean over non-ignored rows).      logits: [rows, vocab]; targets: [rows]
// Throws std::out_of_range (naming the row, the target and vocab) if a target other than ignore_index is
// outside [0, vocab); nothing is written in that case. vocab must be >= 1 when rows > 0.
template <class T>
void cross_entropy_forward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                           int64_t ignore_index, T* loss_per_row, T* lse);
// dlogits[r, :] = (softmax(logits[r, :]) - onehot(targets[r])) * grad_scale_per_row[r], computed as
// exp(logits - lse) in one pass (probabilities are never stored elsewhere); rows with targets[r] == ignore_index
// get zeros. grad_scale_per_row[r] = d loss / d loss_per_row[r] (e.g. 1 / count for a mean). Same target
// check and exception as the forward.                                      dlogits: [rows, vocab]
template <class T>
void cross_entropy_backward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                            int64_t ignore_index, const T* lse, const T* grad_scale_per_row, T* dlogits);

#define UOE_ROWWISE_EXTERN(T)                                                                                   \
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
                                                 const T*, const T*, T*);
UOE_ROWWISE_EXTERN(float)
UOE_ROWWISE_EXTERN(double)
#undef UOE_ROWWISE_EXTERN

}  // namespace uoe::cpu
