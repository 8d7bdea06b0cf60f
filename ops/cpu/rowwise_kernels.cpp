// uoe::cpu row-wise kernels: per-row bodies (UOE_SIMD, vectorised with vm:: math) and their OpenMP drivers; the
// cross-entropy op's helpers (target check, mean, per-row scale). Every body reads and writes its rows in their
// storage type (T, or bfloat16 computed in float32 registers), so bfloat16 rows never pass through a float32 copy.
#include "ops/kernels/rowwise.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "ops/cpu/scratch.h"
#include "ops/cpu/simd.h"

// Per-row / per-chunk bodies are compiled per ISA (UOE_SIMD) and the best one is picked at load time (ifunc).
// They contain no OpenMP parallel regions; the drivers below split rows across threads and call them.
#define UOE_ALWAYS_INLINE inline __attribute__((always_inline))
// A row body lambda: inlined into its clone like the functions above (else it is compiled for the default ISA).
#define UOE_ROW_BODY __attribute__((always_inline))

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
// Elements are stored as S (T itself, or bfloat16 with T = float) and computed in T: T(x[j]) widens a bfloat16
// exactly, put() rounds once. With S = T every body is the plain T code.
// Sums are added in one fixed order (fixed_order_sum, ops/cpu/simd.h), so that a bfloat16 row and its float32
// widening give the same bits.
// max_j x[j] (the order does not matter: max is exact)                        x: [n]
template <class T, class S>
UOE_ALWAYS_INLINE T row_max(const S* x, int64_t n) {
  T m = -std::numeric_limits<T>::infinity();
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = T(x[j]) > m ? T(x[j]) : m;
  return m;
}
// sum_j a[j] * b[j]                                                           a, b: [n]
template <class T, class S>
UOE_ALWAYS_INLINE T row_dot(const S* a, const S* b, int64_t n) {
  return fixed_order_sum<T>(n, [&](int64_t j) UOE_FIXED_SUM_TERM { return T(a[j]) * T(b[j]); });
}
template <class T, class S>
UOE_ALWAYS_INLINE T row_sum(const S* a, int64_t n) {
  return fixed_order_sum<T>(n, [&](int64_t j) UOE_FIXED_SUM_TERM { return T(a[j]); });
}
// dst = v rounded to S. A bfloat16 is written as its bits: GCC vectorises that, not a copy of the struct.
template <class S, class T>
UOE_ALWAYS_INLINE void put(S& dst, T v) {
  if constexpr (std::is_same_v<S, BFloat16>) dst.bits = float_to_bf16_bits(v);
  else dst = v;
}
template <class T>
UOE_ALWAYS_INLINE T inv_sqrt(T v) {
  return T(1) / std::sqrt(v);
}

// ---- bfloat16 rows through float buffers -----------------------------------------------------------------
// In the AVX-512 clones GCC vectorises a loop that mixes bfloat16 loads with float arithmetic at half the width of a
// float loop, so exp over a bfloat16 row ran at half speed (softmax, log_softmax and cross entropy took 1.5-2.3x the
// float rows' time). Their exp loops therefore read floats: a bfloat16 row is widened (exactly) into this thread's
// float buffer, whole (softmax, which keeps exp for its last pass) or kChunk elements at a time (the sums of exp,
// cross entropy's gradient), and each float result is rounded once: the float path's bits on the widened row.
float* thread_row_buffer(int64_t floats) {
  thread_local detail::Scratch scratch;
  return static_cast<float*>(scratch.get(size_t(floats) * sizeof(float)));
}
// This thread's buffer of n floats for elements stored as S (a row, or a piece of one): none where S is T.
template <class T, class S>
T* row_buffer(int64_t n) {
  if constexpr (std::is_same_v<S, T>) return nullptr;
  else return thread_row_buffer(n);
}
// body(xf, yf) on n elements (a row, or a piece of one): x and y themselves where S is T; else buf, which holds x
// widened and becomes y (the body may write yf[j] once it has read xf[j]), rounded into y unless y is null.
//                                                                                            x, y, buf: [n]
template <class T, class S, class Body>
UOE_ALWAYS_INLINE void in_float(int64_t n, const S* x, S* y, T* buf, Body&& body) {
  if constexpr (std::is_same_v<S, T>) {
    body(x, y);
  } else {
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) buf[j] = T(x[j]);
    body(buf, buf);
    if (y) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) put(y[j], buf[j]);
    }
  }
}
// Elementwise passes go through the buffer this many elements at a time (16 KB of floats: L1-resident).
constexpr int64_t kChunk = 4096;
static_assert(kChunk % kFixedSumLanes == 0, "a piece of a fixed-order sum must keep its lanes");
// sum_j exp(x[j] - m) in fixed_order_sum's order, kChunk elements at a time through in_float (a multiple of the
// sum's lanes, so the order is the whole row's).                                         x: [n], buf: [kChunk]
template <class T, class S>
UOE_ALWAYS_INLINE T row_sum_exp(const S* x, T m, int64_t n, T* buf) {
  FixedOrderSum<T> sum;
  for (int64_t c0 = 0; c0 < n; c0 += kChunk) {
    const int64_t len = std::min(kChunk, n - c0);
    in_float(len, x + c0, static_cast<S*>(nullptr), buf, [&](const T* xc, T*) UOE_ROW_BODY {
      sum.add(len, [&](int64_t j) UOE_FIXED_SUM_TERM { return vm::exp_ftz(xc[j] - m); });
    });
  }
  return sum.total();
}

// ---- softmax / log_softmax --------------------------------------------------------------------------------
// rows [r0, r1) of x, y: [rows, n]
template <class T, class S>
UOE_SIMD void softmax_fwd_rows(int64_t r0, int64_t r1, int64_t n, const S* x, S* y) {
  T* buf = row_buffer<T, S>(n);
  for (int64_t r = r0; r < r1; ++r) {
    in_float(n, x + r * n, y + r * n, buf, [&](const T* xr, T* yr) UOE_ROW_BODY {
      const T m = row_max<T>(xr, n);
      if (r + 1 < r1) prefetch_row(x + (r + 1) * n, n * int64_t(sizeof(S)));
      const T s = fixed_order_sum<T>(n, [&](int64_t j) UOE_FIXED_SUM_TERM { return yr[j] = vm::exp_ftz(xr[j] - m); });
      const T inv = T(1) / s;  // exp stored once, then scaled in place
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) yr[j] *= inv;
    });
  }
}
template <class T, class S>
UOE_SIMD void softmax_bwd_rows(int64_t r0, int64_t r1, int64_t n, const S* y, const S* dy, S* dx) {
  for (int64_t r = r0; r < r1; ++r) {
    const S *yr = y + r * n, *dyr = dy + r * n;
    S* dxr = dx + r * n;
    const T dot = row_dot<T>(dyr, yr, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) put(dxr[j], T(yr[j]) * (T(dyr[j]) - dot));
  }
}
template <class T, class S>
UOE_SIMD void log_softmax_fwd_rows(int64_t r0, int64_t r1, int64_t n, const S* x, S* y) {
  T* buf = row_buffer<T, S>(std::min(n, kChunk));
  for (int64_t r = r0; r < r1; ++r) {
    const S* xr = x + r * n;
    S* yr = y + r * n;
    const T m = row_max<T>(xr, n);
    if (r + 1 < r1) prefetch_row(xr + n, n * int64_t(sizeof(S)));
    const T log_s = vm::log(row_sum_exp(xr, m, n, buf));
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) put(yr[j], (T(xr[j]) - m) - log_s);
  }
}
template <class T, class S>
UOE_SIMD void log_softmax_bwd_rows(int64_t r0, int64_t r1, int64_t n, const S* y, const S* dy, S* dx) {
  for (int64_t r = r0; r < r1; ++r) {
    const S *yr = y + r * n, *dyr = dy + r * n;
    S* dxr = dx + r * n;
    const T sdy = row_sum<T>(dyr, n);
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) put(dxr[j], T(dyr[j]) - vm::exp_ftz(T(yr[j])) * sdy);
  }
}

// ---- RMSNorm ----------------------------------------------------------------------------------------------
// w: [n] (never null here: the driver substitutes ones); rstd: [rows] or null
template <class T, class S>
UOE_SIMD void rms_fwd_rows(int64_t r0, int64_t r1, int64_t n, const S* x, const S* w, T eps, S* y, T* rstd) {
  for (int64_t r = r0; r < r1; ++r) {
    const S* xr = x + r * n;
    S* yr = y + r * n;
    const T rs = inv_sqrt(row_dot<T>(xr, xr, n) / T(n) + eps);
    if (r + 1 < r1) prefetch_row(xr + n, n * int64_t(sizeof(S)));
    if (rstd) rstd[r] = rs;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) put(yr[j], (T(xr[j]) * rs) * T(w[j]));
  }
}
// pw: this chunk's partial dweight [n] (zeroed here) or null
template <class T, class S>
UOE_SIMD void rms_bwd_rows(int64_t r0, int64_t r1, int64_t n, const S* x, const S* w, const T* rstd, const S* dy,
                             S* dx, T* pw) {
  if (pw) std::fill(pw, pw + n, T(0));
  for (int64_t r = r0; r < r1; ++r) {
    const S *xr = x + r * n, *dyr = dy + r * n;
    S* dxr = dx + r * n;
    const T rs = rstd[r];
    const T dot = fixed_order_sum<T>(n, [&](int64_t j) UOE_FIXED_SUM_TERM {  // sum_j g_j x_j
      return (T(dyr[j]) * T(w[j])) * T(xr[j]);
    });
    const T c = dot * (rs * rs * rs) / T(n);
    if (pw) {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const T xj = T(xr[j]), dyj = T(dyr[j]);
        pw[j] += dyj * (xj * rs);
        put(dxr[j], rs * (dyj * T(w[j])) - xj * c);
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) put(dxr[j], rs * (T(dyr[j]) * T(w[j])) - T(xr[j]) * c);
    }
  }
}

// ---- LayerNorm --------------------------------------------------------------------------------------------
// w, b: [n] (never null here); mean, rstd: [rows] or null
template <class T, class S>
UOE_SIMD void ln_fwd_rows(int64_t r0, int64_t r1, int64_t n, const S* x, const S* w, const S* b, T eps, S* y,
                            T* mean, T* rstd) {
  for (int64_t r = r0; r < r1; ++r) {
    const S* xr = x + r * n;
    S* yr = y + r * n;
    const T mu = row_sum<T>(xr, n) / T(n);
    const T var = fixed_order_sum<T>(n, [&](int64_t j) UOE_FIXED_SUM_TERM {
      const T d = T(xr[j]) - mu;
      return d * d;
    });
    const T rs = inv_sqrt(var / T(n) + eps);
    if (mean) mean[r] = mu;
    if (rstd) rstd[r] = rs;
#pragma omp simd
    for (int64_t j = 0; j < n; ++j) put(yr[j], ((T(xr[j]) - mu) * rs) * T(w[j]) + T(b[j]));
  }
}
// pw, pb: this chunk's partial dweight / dbias [n] (zeroed here), both null or both non-null
template <class T, class S>
UOE_SIMD void ln_bwd_rows(int64_t r0, int64_t r1, int64_t n, const S* x, const S* w, const T* mean, const T* rstd,
                            const S* dy, S* dx, T* pw, T* pb) {
  if (pw) {
    std::fill(pw, pw + n, T(0));
    std::fill(pb, pb + n, T(0));
  }
  for (int64_t r = r0; r < r1; ++r) {
    const S *xr = x + r * n, *dyr = dy + r * n;
    S* dxr = dx + r * n;
    const T mu = mean[r], rs = rstd[r];
    auto g = [&](int64_t j) UOE_FIXED_SUM_TERM { return T(dyr[j]) * T(w[j]); };
    const T sg = fixed_order_sum<T>(n, g);  // sum g
    const T sgx = fixed_order_sum<T>(n, [&](int64_t j) UOE_FIXED_SUM_TERM { return g(j) * ((T(xr[j]) - mu) * rs); });
    const T a = sg / T(n), c = sgx / T(n);
    if (pw) {  // pb is then non-null too; dy is read before dx is stored (dx may alias dy)
#pragma omp simd
      for (int64_t j = 0; j < n; ++j) {
        const T xhat = (T(xr[j]) - mu) * rs, dyj = T(dyr[j]);
        pw[j] += dyj * xhat;
        pb[j] += dyj;
        put(dxr[j], rs * ((dyj * T(w[j]) - a) - xhat * c));
      }
    } else {
#pragma omp simd
      for (int64_t j = 0; j < n; ++j)
        put(dxr[j], rs * ((T(dyr[j]) * T(w[j]) - a) - ((T(xr[j]) - mu) * rs) * c));
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
template <class T, class S>
UOE_SIMD void ce_fwd_rows(int64_t r0, int64_t r1, int64_t v, const S* logits, const int64_t* targets,
                            int64_t ignore_index, T* loss, T* lse) {
  T* buf = row_buffer<T, S>(std::min(v, kChunk));
  for (int64_t r = r0; r < r1; ++r) {
    const S* xr = logits + r * v;
    const T m = row_max<T>(xr, v);
    if (r + 1 < r1) prefetch_row(xr + v, v * int64_t(sizeof(S)));
    const T l = m + vm::log(row_sum_exp(xr, m, v, buf));
    lse[r] = l;
    const int64_t t = targets[r];
    loss[r] = t == ignore_index ? T(0) : l - T(xr[t]);
  }
}
// The target's entry is (p - 1) g computed as p g - g, before the one rounding to S.
template <class T, class S>
UOE_SIMD void ce_bwd_rows(int64_t r0, int64_t r1, int64_t v, const S* logits, const int64_t* targets,
                            int64_t ignore_index, const T* lse, const T* scale, S* dlogits) {
  const int64_t chunk = std::min(v, kChunk);
  T* buf = row_buffer<T, S>(chunk);
  for (int64_t r = r0; r < r1; ++r) {
    S* dr = dlogits + r * v;
    const int64_t t = targets[r];
    if (t == ignore_index) {
      std::fill(dr, dr + v, S(T(0)));
      continue;
    }
    const T l = lse[r], g = scale[r];
    for (int64_t c0 = 0; c0 < v; c0 += chunk) {  // columns [c0, c0 + len)
      const int64_t len = std::min(chunk, v - c0), tc = t - c0;
      in_float(len, logits + r * v + c0, dr + c0, buf, [&](const T* xc, T* dc) UOE_ROW_BODY {
#pragma omp simd
        for (int64_t j = 0; j < len; ++j) dc[j] = vm::exp_ftz(xc[j] - l) * g;
        if (tc >= 0 && tc < len) dc[tc] -= g;
      });
    }
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

// ---- the drivers, for elements stored as S and computed in T ---------------------------------------------
template <class T, class S>
void softmax_fwd(int64_t rows, int64_t n, const S* x, S* y) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { softmax_fwd_rows<T>(b, e, n, x, y); });
}
template <class T, class S>
void softmax_bwd(int64_t rows, int64_t n, const S* y, const S* dy, S* dx) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { softmax_bwd_rows<T>(b, e, n, y, dy, dx); });
}
template <class T, class S>
void log_softmax_fwd(int64_t rows, int64_t n, const S* x, S* y) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { log_softmax_fwd_rows<T>(b, e, n, x, y); });
}
template <class T, class S>
void log_softmax_bwd(int64_t rows, int64_t n, const S* y, const S* dy, S* dx) {
  if (rows <= 0 || n <= 0) return;
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { log_softmax_bwd_rows<T>(b, e, n, y, dy, dx); });
}

template <class T, class S>
void rms_fwd(int64_t rows, int64_t n, const S* x, const S* weight, double eps, S* y, T* rstd) {
  if (rows <= 0 || n <= 0) return;
  std::vector<S> ones(weight ? 0 : static_cast<size_t>(n), S(T(1)));
  const S* w = weight ? weight : ones.data();
  parallel_rows(rows, n, [&](int64_t b, int64_t e) { rms_fwd_rows<T>(b, e, n, x, w, T(eps), y, rstd); });
}
template <class T, class S>
void rms_bwd(int64_t rows, int64_t n, const S* x, const S* weight, const T* rstd, const S* dy, S* dx, T* dweight) {
  if (rows <= 0 || n <= 0) return;
  std::vector<S> ones(weight ? 0 : static_cast<size_t>(n), S(T(1)));
  const S* w = weight ? weight : ones.data();
  if (!dweight) {
    parallel_rows(rows, n, [&](int64_t b, int64_t e) { rms_bwd_rows<T>(b, e, n, x, w, rstd, dy, dx, nullptr); });
    return;
  }
  chunked_param_grads<T>(rows, n, 1, dweight, nullptr, [&](int64_t b, int64_t e, T* pw, T*) {
    rms_bwd_rows<T>(b, e, n, x, w, rstd, dy, dx, pw);
  });
}

template <class T, class S>
void ln_fwd(int64_t rows, int64_t n, const S* x, const S* weight, const S* bias, double eps, S* y, T* mean,
            T* rstd) {
  if (rows <= 0 || n <= 0) return;
  std::vector<S> ones(weight ? 0 : static_cast<size_t>(n), S(T(1))), zeros(bias ? 0 : static_cast<size_t>(n), S(T(0)));
  const S* w = weight ? weight : ones.data();
  const S* b = bias ? bias : zeros.data();
  parallel_rows(rows, n, [&](int64_t r0, int64_t r1) { ln_fwd_rows<T>(r0, r1, n, x, w, b, T(eps), y, mean, rstd); });
}
template <class T, class S>
void ln_bwd(int64_t rows, int64_t n, const S* x, const S* weight, const T* mean, const T* rstd, const S* dy, S* dx,
            T* dweight, T* dbias) {
  if (rows <= 0 || n <= 0) return;
  std::vector<S> ones(weight ? 0 : static_cast<size_t>(n), S(T(1)));
  const S* w = weight ? weight : ones.data();
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

template <class T, class S>
TargetCheck ce_fwd_checked(int64_t rows, int64_t vocab, const S* logits, const int64_t* targets,
                           int64_t ignore_index, T* loss_per_row, T* lse) {
  const TargetCheck c = count_targets(rows, vocab, targets, ignore_index);
  if (c.bad_row >= 0 || rows <= 0 || vocab <= 0) return c;
  parallel_rows(rows, vocab, [&](int64_t b, int64_t e) {
    ce_fwd_rows<T>(b, e, vocab, logits, targets, ignore_index, loss_per_row, lse);
  });
  return c;
}
template <class T, class S>
void ce_bwd(int64_t rows, int64_t vocab, const S* logits, const int64_t* targets, int64_t ignore_index, const T* lse,
            const T* grad_scale_per_row, S* dlogits) {
  const TargetCheck c = count_targets(rows, vocab, targets, ignore_index);
  if (c.bad_row >= 0) throw_bad_target("cross_entropy_backward", c, vocab, ignore_index);
  if (rows <= 0 || vocab <= 0) return;
  parallel_rows(rows, vocab, [&](int64_t b, int64_t e) {
    ce_bwd_rows<T>(b, e, vocab, logits, targets, ignore_index, lse, grad_scale_per_row, dlogits);
  });
}

}  // namespace

// ---- public entry points: T, and bfloat16 computed in float32 ---------------------------------------------
template <class T>
void softmax_forward(int64_t rows, int64_t n, const T* x, T* y) {
  softmax_fwd<T>(rows, n, x, y);
}
void softmax_forward(int64_t rows, int64_t n, const BFloat16* x, BFloat16* y) { softmax_fwd<float>(rows, n, x, y); }
template <class T>
void softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  softmax_bwd<T>(rows, n, y, dy, dx);
}
void softmax_backward(int64_t rows, int64_t n, const BFloat16* y, const BFloat16* dy, BFloat16* dx) {
  softmax_bwd<float>(rows, n, y, dy, dx);
}
template <class T>
void log_softmax_forward(int64_t rows, int64_t n, const T* x, T* y) {
  log_softmax_fwd<T>(rows, n, x, y);
}
void log_softmax_forward(int64_t rows, int64_t n, const BFloat16* x, BFloat16* y) {
  log_softmax_fwd<float>(rows, n, x, y);
}
template <class T>
void log_softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  log_softmax_bwd<T>(rows, n, y, dy, dx);
}
void log_softmax_backward(int64_t rows, int64_t n, const BFloat16* y, const BFloat16* dy, BFloat16* dx) {
  log_softmax_bwd<float>(rows, n, y, dy, dx);
}

template <class T>
void rms_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, double eps, T* y, T* rstd) {
  rms_fwd<T>(rows, n, x, weight, eps, y, rstd);
}
void rms_norm_forward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, double eps, BFloat16* y,
                      float* rstd) {
  rms_fwd<float>(rows, n, x, weight, eps, y, rstd);
}
template <class T>
void rms_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* rstd, const T* dy, T* dx,
                       T* dweight) {
  rms_bwd<T>(rows, n, x, weight, rstd, dy, dx, dweight);
}
void rms_norm_backward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, const float* rstd,
                       const BFloat16* dy, BFloat16* dx, float* dweight) {
  rms_bwd<float>(rows, n, x, weight, rstd, dy, dx, dweight);
}

template <class T>
void layer_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, const T* bias, double eps, T* y,
                        T* mean, T* rstd) {
  ln_fwd<T>(rows, n, x, weight, bias, eps, y, mean, rstd);
}
void layer_norm_forward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, const BFloat16* bias,
                        double eps, BFloat16* y, float* mean, float* rstd) {
  ln_fwd<float>(rows, n, x, weight, bias, eps, y, mean, rstd);
}
template <class T>
void layer_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dweight, T* dbias) {
  ln_bwd<T>(rows, n, x, weight, mean, rstd, dy, dx, dweight, dbias);
}
void layer_norm_backward(int64_t rows, int64_t n, const BFloat16* x, const BFloat16* weight, const float* mean,
                         const float* rstd, const BFloat16* dy, BFloat16* dx, float* dweight, float* dbias) {
  ln_bwd<float>(rows, n, x, weight, mean, rstd, dy, dx, dweight, dbias);
}

template <class T>
TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                                          int64_t ignore_index, T* loss_per_row, T* lse) {
  return ce_fwd_checked<T>(rows, vocab, logits, targets, ignore_index, loss_per_row, lse);
}
TargetCheck cross_entropy_forward_checked(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,
                                          int64_t ignore_index, float* loss_per_row, float* lse) {
  return ce_fwd_checked<float>(rows, vocab, logits, targets, ignore_index, loss_per_row, lse);
}
template <class T>
void cross_entropy_forward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                           int64_t ignore_index, T* loss_per_row, T* lse) {
  const TargetCheck c = ce_fwd_checked<T>(rows, vocab, logits, targets, ignore_index, loss_per_row, lse);
  if (c.bad_row >= 0) throw_bad_target("cross_entropy_forward", c, vocab, ignore_index);
}
template <class T>
void cross_entropy_backward(int64_t rows, int64_t vocab, const T* logits, const int64_t* targets,
                            int64_t ignore_index, const T* lse, const T* grad_scale_per_row, T* dlogits) {
  ce_bwd<T>(rows, vocab, logits, targets, ignore_index, lse, grad_scale_per_row, dlogits);
}
void cross_entropy_backward(int64_t rows, int64_t vocab, const BFloat16* logits, const int64_t* targets,
                            int64_t ignore_index, const float* lse, const float* grad_scale_per_row,
                            BFloat16* dlogits) {
  ce_bwd<float>(rows, vocab, logits, targets, ignore_index, lse, grad_scale_per_row, dlogits);
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
