// uoe::cpu row-wise kernels: per-row bodies (UOE_SIMD, vectorised with vm:: math) and their OpenMP drivers; the
// cross-entropy op's helpers (target check, mean, per-row scale, bfloat16 logits through the float32 kernels).
#include "ops/kernels/rowwise.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/cpu/simd.h"

// Per-row / per-chunk bodies are compiled per ISA (UOE_SIMD) and the best one is picked at load time (ifunc).
// They contain no OpenMP parallel regions; the drivers below split rows across threads and call them.
#define UOE_ALWAYS_INLINE inline __attribute__((always_inline))

namespace uoe::cpu {
namespace {

// Below this many elements a call runs on the calling thread only (results are identical either way).
constexpr int64_t kParallelMinElems = int64_t{1} << 15;
// Norm parameter gradients: rows are cut into chunks of chunk_rows(rows) rows (a function of `rows` only, never of
// the thread count); at most kMaxChunks partial sums of length n are kept.
constexpr int64_t kMinChunkRows = 32;
constexpr int64_t kMaxChunks = 256;

int64_t chunk_rows(int64_t rows) { return std::max(kMinChunkRows, (rows + kMaxChunks - 1) / kMaxChunks); }

// Runs f(row_begin, row_end) on contiguous, balanced row ranges, one per OpenMP thread.
template <class F>
void parallel_rows(int64_t rows, int64_t n, F&& f) {
#pragma omp parallel if (rows > 1 && rows * n >= kParallelMinElems)
  {
    const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t b = rows * t / nt, e = rows * (t + 1) / nt;
    if (b < e) f(b, e);
  }
}

// Software prefetch (into L2) of up to the first kPrefetchBytes of the next row, issued before the compute-heavy
// passes over the current (L1-resident) row, so that DRAM traffic overlaps the exp work instead of alternating
// with it. Longer rows are left to the hardware prefetcher.
constexpr int64_t kPrefetchBytes = 16384;
UOE_ALWAYS_INLINE void prefetch_row(const void* p, int64_t bytes) {
  const char* c = static_cast<const char*>(p);
  const int64_t e = bytes < kPrefetchBytes ? bytes : kPrefetchBytes;
  for (int64_t o = 0; o < e; o += 64) __builtin_prefetch(c + o, 0, 2);
}

// ---- vectorised row reductions (inlined into the clones) --------------------------------------------------
// max_j x[j]                                                                  x: [n]
template <class T>
UOE_ALWAYS_INLINE T row_max(const T* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = x[j] > m ? x[j] : m;
  return m;
}
// sum_j exp(x[j] - m)                                                         x: [n]
template <class T>
UOE_ALWAYS_INLINE T row_sum_exp(const T* x, T m, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += vm::exp_ftz(x[j] - m);
  return s;
}
// sum_j a[j] * b[j]                                                           a, b: [n]
template <class T>
UOE_ALWAYS_INLINE T row_dot(const T* a, const T* b, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
}
template <class T>
UOE_ALWAYS_INLINE T row_sum(const T* a, int64_t n) {
  T s = 0;
#pragma omp simd reduction(+ : s)
  for (int64_t j = 0; j < n; ++j) s += a[j];
  return s;
}
template <class T>
UOE_ALWAYS_INLINE T inv_sqrt(T v) {
  return T(1) / std::sqrt(v);
}

// ---- softmax / log_softmax --------------------------------------------------------------------------------
// rows [r0, r1) of x, y: [rows, n]
template <class T>
UOE_SIMD void softmax_fwd_rows(int64_t r0, int64_t r1, int64_t n, const T* x, T* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T m = row_max(xr, n);
    if (r + 1 < r1) prefetch_row(xr + n, n * int64_t(sizeof(T)));
    T s = 0;
#pragma omp simd reduction(+ : s)
    for (int64_t j = 0; j < n; ++j) {
      const T e = vm::exp_ftz(xr[j] - m);
      yr[j] = e;
      s += e;
    }
    const T inv = T(1) / s;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
  }
}
template <class T>
UOE_SIMD void softmax_bwd_rows(int64_t r0, int64_t r1, int64_t n, const T* y, const T* dy, T* dx) {
  for (int64_t r = r0; r < r1; ++r) {
    const T *yr = y + r * n, *dyr = dy + r * n;
    T* dxr = dx + r * n;
    const T dot = row_dot(dyr, yr, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dxr[j] = yr[j] * (dyr[j] - dot);
  }
}
template <class T>
UOE_SIMD void log_softmax_fwd_rows(int64_t r0, int64_t r1, int64_t n, const T* x, T* y) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T m = row_max(xr, n);
    if (r + 1 < r1) prefetch_row(xr + n, n * int64_t(sizeof(T)));
    const T log_s = vm::log(row_sum_exp(xr, m, n));
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] - m) - log_s;
  }
}
template <class T>
UOE_SIMD void log_softmax_bwd_rows(int64_t r0, int64_t r1, int64_t n, const T* y, const T* dy, T* dx) {
  for (int64_t r = r0; r < r1; ++r) {
    const T *yr = y + r * n, *dyr = dy + r * n;
    T* dxr = dx + r * n;
    const T sdy = row_sum(dyr, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) dxr[j] = dyr[j] - vm::exp_ftz(yr[j]) * sdy;
  }
}

// ---- RMSNorm ----------------------------------------------------------------------------------------------
// w: [n] (never null here: the driver substitutes ones); rstd: [rows] or null
template <class T>
UOE_SIMD void rms_fwd_rows(int64_t r0, int64_t r1, int64_t n, const T* x, const T* w, T eps, T* y, T* rstd) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T rs = inv_sqrt(row_dot(xr, xr, n) / T(n) + eps);
    if (r + 1 < r1) prefetch_row(xr + n, n * int64_t(sizeof(T)));
    if (rstd) rstd[r] = rs;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = (xr[j] * rs) * w[j];
  }
}
// pw: this chunk's partial dweight [n] (zeroed here) or null
template <class T>
UOE_SIMD void rms_bwd_rows(int64_t r0, int64_t r1, int64_t n, const T* x, const T* w, const T* rstd, const T* dy,
                             T* dx, T* pw) {
  if (pw) std::fill(pw, pw + n, T(0));
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = x + r * n, *dyr = dy + r * n;
    T* dxr = dx + r * n;
    const T rs = rstd[r];
    T dot = 0;  // sum_j g_j x_j
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < n; ++j) dot += (dyr[j] * w[j]) * xr[j];
    const T c = dot * (rs * rs * rs) / T(n);
    if (pw) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const T xj = xr[j], dyj = dyr[j];
        pw[j] += dyj * (xj * rs);
        dxr[j] = rs * (dyj * w[j]) - xj * c;
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dxr[j] = rs * (dyr[j] * w[j]) - xr[j] * c;
    }
  }
}

// ---- LayerNorm --------------------------------------------------------------------------------------------
// w, b: [n] (never null here); mean, rstd: [rows] or null
template <class T>
UOE_SIMD void ln_fwd_rows(int64_t r0, int64_t r1, int64_t n, const T* x, const T* w, const T* b, T eps, T* y,
                            T* mean, T* rstd) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    const T mu = row_sum(xr, n) / T(n);
    T var = 0;
#pragma omp simd reduction(+ : var)
    for (int64_t j = 0; j < n; ++j) var += (xr[j] - mu) * (xr[j] - mu);
    const T rs = inv_sqrt(var / T(n) + eps);
    if (mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) yr[j] = ((xr[j] - mu) * rs) * w[j] + b[j];
  }
}
// pw, pb: this chunk's partial dweight / dbias [n] (zeroed here), both null or both non-null
template <class T>
UOE_SIMD void ln_bwd_rows(int64_t r0, int64_t r1, int64_t n, const T* x, const T* w, const T* mean, const T* rstd,
                            const T* dy, T* dx, T* pw, T* pb) {
  if (pw) {
    std::fill(pw, pw + n, T(0));
    std::fill(pb, pb + n, T(0));
  }
  for (int64_t r = r0; r < r1; ++r) {
    const T *xr = x + r * n, *dyr = dy + r * n;
    T* dxr = dx + r * n;
    const T mu = mean[r], rs = rstd[r];
    T sg = 0, sgx = 0;  // sum g, sum g * xhat
#pragma omp simd reduction(+ : sg, sgx)
    for (int64_t j = 0; j < n; ++j) {
      const T g = dyr[j] * w[j];
      sg += g;
      sgx += g * ((xr[j] - mu) * rs);
    }
    const T a = sg / T(n), c = sgx / T(n);
    if (pw) {  // pb is then non-null too; dy is read before dx is stored (dx may alias dy)
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const T xhat = (xr[j] - mu) * rs, dyj = dyr[j];
        pw[j] += dyj * xhat;
        pb[j] += dyj;
        dxr[j] = rs * ((dyj * w[j] - a) - xhat * c);
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) dxr[j] = rs * ((dyr[j] * w[j] - a) - ((xr[j] - mu) * rs) * c);
    }
  }
}

// out[j] = sum_{c = 0..nc-1, in order} part[c * n + j]  for j in [j0, j1)     part: [nc, n]
template <class T>
UOE_SIMD void reduce_chunks_cols(int64_t nc, int64_t n, int64_t j0, int64_t j1, const T* part, T* out) {
#pragma omp simd
  for (int64_t j = j0; j < j1; ++j) out[j] = part[j];
  for (int64_t c = 1; c < nc; ++c) {
    const T* p = part + c * n;
#pragma omp simd
    for (int64_t j = j0; j < j1; ++j) out[j] += p[j];
  }
}

// ---- cross entropy ----------------------------------------------------------------------------------------
template <class T>
UOE_SIMD void ce_fwd_rows(int64_t r0, int64_t r1, int64_t v, const T* logits, const int64_t* targets,
                            int64_t ignore_index, T* loss, T* lse) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = logits + r * v;
    const T m = row_max(xr, v);
    if (r + 1 < r1) prefetch_row(xr + v, v * int64_t(sizeof(T)));
    const T l = m + vm::log(row_sum_exp(xr, m, v));
    lse[r] = l;
    const int64_t t = targets[r];
    loss[r] = t == ignore_index ? T(0) : l - xr[t];
  }
}
template <class T>
UOE_SIMD void ce_bwd_rows(int64_t r0, int64_t r1, int64_t v, const T* logits, const int64_t* targets,
                            int64_t ignore_index, const T* lse, const T* scale, T* dlogits) {
  for (int64_t r = r0; r < r1; ++r) {
    const T* xr = logits + r * v;
    T* dr = dlogits + r * v;
    const int64_t t = targets[r];
    if (t == ignore_index) {
      std::fill(dr, dr + v, T(0));
      continue;
    }
    const T l = lse[r], g = scale[r];
#pragma omp simd
    for (int64_t j = 0; j < v; ++j) dr[j] = vm::exp_ftz(xr[j] - l) * g;
    dr[t] -= g;
  }
}

// ---- drivers helpers --------------------------------------------------------------------------------------
// Parameter gradients d[k] (k < nparts; d[k] may be null = not wanted) as sums over rows of per-chunk partials
// produced by chunk_fn(r0, r1, partial_0, partial_1), deterministically: fixed chunks (chunk_rows(rows)), one
// partial [n] per chunk and parameter, reduced in chunk order (columns split across threads).
template <class T, class ChunkFn>
void chunked_param_grads(int64_t rows, int64_t n, int nparts, T* d0, T* d1, ChunkFn&& chunk_fn) {
  const int64_t cr = chunk_rows(rows), nc = (rows + cr - 1) / cr;
  std::unique_ptr<T[]> part(new T[static_cast<size_t>(nparts * nc * n)]);  // [nparts, nc, n]
  T* p = part.get();
#pragma omp parallel for schedule(static) if (nc > 1 && rows * n >= kParallelMinElems)
  for (int64_t c = 0; c < nc; ++c)
    chunk_fn(c * cr, std::min(rows, (c + 1) * cr), p + c * n, nparts > 1 ? p + (nc + c) * n : nullptr);
  constexpr int64_t kCols = 1024;
  const int64_t nb = (n + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (nb > 1 && nc * n >= kParallelMinElems)
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t j0 = b * kCols, j1 = std::min(n, j0 + kCols);
    if (d0) reduce_chunks_cols<T>(nc, n, j0, j1, p, d0);
    if (d1) reduce_chunks_cols<T>(nc, n, j0, j1, p + nc * n, d1);
  }
}

// Counts the targets other than ignore_index and finds the first one outside [0, vocab).
TargetCheck count_targets(int64_t rows, int64_t vocab, const int64_t* targets, int64_t ignore_index) {
  TargetCheck c;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = targets[r];
    if (t == ignore_index) continue;
    ++c.count;
    if ((t < 0 || t >= vocab) && c.bad_row < 0) {
      c.bad_row = r;
      c.bad_target = t;
    }
  }
  return c;
}

void throw_bad_target(const char* fn, const TargetCheck& c, int64_t vocab, int64_t ignore_index) {
  throw std::out_of_range(std::string("uoe::cpu::") + fn + ": target " + std::to_string(c.bad_target) + " at row " +
                          std::to_string(c.bad_row) + " is out of range for vocab size " + std::to_string(vocab) +
                          " (valid: [0, " + std::to_string(vocab) + ") or ignore_index " +
                          std::to_string(ignore_index) + ")");
}

// logits [rows, vocab] widened to float32 (exactly).
std::vector<float> widen(int64_t rows, int64_t vocab, const BFloat16* logits) {
  std::vector<float> x(static_cast<size_t>(rows * vocab));
  convert_bf16_to_f32(logits, x.data(), rows * vocab);
  return x;
}

}  // namespace

// ---- public entry points ----------------------------------------------------------------------------------
template <class T>
void softmax_forward(int64_t rows, int64_t n, const T* x, T* y) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { softmax_fwd_rows<T>(b, e, n, x, y); });
}
template <class T>
void softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { softmax_bwd_rows<T>(b, e, n, y, dy, dx); });
}
template <class T>
void log_softmax_forward(int64_t rows, int64_t n, const T* x, T* y) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { log_softmax_fwd_rows<T>(b, e, n, x, y); });
}
template <class T>
void log_softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { log_softmax_bwd_rows<T>(b, e, n, y, dy, dx); });
}

template <class T>
void rms_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, double eps, T* y, T* rstd) {
  if (rows <= 0 || n <= 0) return;
  std::vector<T> ones(weight ? 0 : static_cast<size_t>(n), T(1));
  const T* w = weight ? weight : ones.data();
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { rms_fwd_rows<T>(b, e, n, x, w, T(eps), y, rstd); });
}
template <class T>
void rms_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* rstd, const T* dy, T* dx,
                       T* dweight) {
  if (rows <= 0 || n <= 0) return;
  std::vector<T> ones(weight ? 0 : static_cast<size_t>(n), T(1));
  const T* w = weight ? weight : ones.data();
  if (!dweight) {
    parallel_rows(rows, n, [&](int64_t b, int64_t e) { rms_bwd_rows<T>(b, e, n, x, w, rstd, dy, dx, nullptr); });
    return;
  }
  chunked_param_grads<T>(rows, n, 1, dweight, nullptr, [&](int64_t b, int64_t e, T* pw, T*) {
    rms_bwd_rows<T>(b, e, n, x, w, rstd, dy, dx, pw);
  });
}

template <class T>
void layer_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, const T* bias, double eps, T* y,
                        T* mean, T* rstd) {
  if (rows <= 0 || n <= 0) return;
  std::vector<T> ones(weight ? 0 : static_cast<size_t>(n), T(1)), zeros(bias ? 0 : static_cast<size_t>(n), T(0));
  const T* w = weight ? weight : ones.data();
  const T* b = bias ? bias : zeros.data();
  parallel_rows(rows, n, [&](int64_t r0, int64_t r1) { ln_fwd_rows<T>(r0, r1, n, x, w, b, T(eps), y, mean, rstd); });
}
template <class T>
void layer_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dweight, T* dbias) {
  if (rows <= 0 || n <= 0) return;
  std::vector<T> ones(weight ? 0 : static_cast<size_t>(n), T(1));
  const T* w = weight ? weight : ones.data();
  if (!dweight && !dbias) {
    parallel_rows(rows, n, [&](int64_t b, int64_t e) {
      ln_bwd_rows<T>(b, e, n, x, w, mean, rstd, dy, dx, nullptr, nullptr);
    });
    return;
  }
  // Both partials are computed when either gradient is wanted (one fused pass); only the wanted ones are reduced.
  chunked_param_grads<T>(rows, n, 2, dweight, dbias, [&](int64_t b, int64_t e, T* pw, T* pb) {
    ln_bwd_rows<T>(b, e, n, x, w, mean, rstd, dy, dx, pw, pb);
  });
}

template <class T>
TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                                          int64_t ignore_index, T* loss_per_row, T* lse) {
  const TargetCheck c = count_targets(rows, vocab, targets, ignore_index);
  if (c.bad_row >= 0 || rows <= 0 || vocab <= 0) return c;
  parallel_rows(rows, vocab, [&](int64_t b, int64_t e) {
    ce_fwd_rows<T>(b, e, vocab, logits, targets, ignore_index, loss_per_row, lse);
  });
  return c;
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
  const TargetCheck c = count_targets(rows, vocab, targets, ignore_index);
  if (c.bad_row >= 0) throw_bad_target("cross_entropy_backward", c, vocab, ignore_index);
  if (rows <= 0 || vocab <= 0) return;
  parallel_rows(rows, vocab, [&](int64_t b, int64_t e) {
    ce_bwd_rows<T>(b, e, vocab, logits, targets, ignore_index, lse, grad_scale_per_row, dlogits);
  });
}

// bfloat16 logits: the float32 kernels on the widened values, dlogits rounded once.
TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,
                                          int64_t ignore_index, float* loss_per_row, float* lse) {
  const std::vector<float> x = widen(rows, vocab, logits);
  return cross_entropy_forward_checked<float>(rows, vocab, x.data(), targets, ignore_index, loss_per_row, lse);
}
void cross_entropy_backward(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,
                            int64_t ignore_index, const float* lse, const float* grad_scale_per_row,
                            BFloat16* dlogits) {
  std::vector<float> d = widen(rows, vocab, logits);  // the float32 gradient, in place of the widened logits
  cross_entropy_backward<float>(rows, vocab, d.data(), targets, ignore_index, lse, grad_scale_per_row, d.data());
  convert_f32_to_bf16(d.data(), dlogits, rows * vocab);
}

template <class T>
void cross_entropy_mean_loss(int64_t rows, const T* loss_per_row, int64_t count, T* loss) {
  double total = 0;  // in row order: the same sum whatever the thread count
  for (int64_t r = 0; r < rows; ++r) total += double(loss_per_row[r]);
  *loss = T(count > 0 ? total / double(count) : 0.0);
}
template <class T>
void cross_entropy_row_scale(int64_t rows, const T* g, int64_t count, T* scale) {
  const T s = T(count > 0 ? double(g[0]) / double(count) : 0.0);
  for (int64_t r = 0; r < rows; ++r) scale[r] = s;
}

UOE_ROWWISE_INSTANTIATE_ROWS(float)
UOE_ROWWISE_INSTANTIATE_ROWS(double)
UOE_ROWWISE_INSTANTIATE_CROSS_ENTROPY(float)
UOE_ROWWISE_INSTANTIATE_CROSS_ENTROPY(double)

}  // namespace uoe::cpu
