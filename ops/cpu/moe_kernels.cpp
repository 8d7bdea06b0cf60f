// uoe::cpu MoE kernels: routing, group L2 norm, router losses and the grouped SwiGLU expert FFN (fwd + bwd).
#include "ops/kernels/moe.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <numeric>
#include <type_traits>

#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/scratch.h"
#include "ops/cpu/loops.h"
#include "ops/kernels/gemm.h"
#include "ops/cpu/simd.h"
#include "ops/cpu/vec_math.h"

namespace uoe::cpu {
namespace {

// Runs f(i) for i in [0, rows), split over OpenMP threads when the work is worth a fork. Each i is handled by
// exactly one thread, so anything f writes for row i alone is thread-count independent.
template <typename F>
void for_rows(int64_t rows, int64_t work_per_row, F&& f) {
  const bool par = rows > 1 && rows * std::max<int64_t>(work_per_row, 1) >= 16384 && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (par)
  for (int64_t i = 0; i < rows; ++i) f(i);
}

// Uninitialised scratch (no zero-fill pass over buffers the kernels overwrite anyway).
template <typename T>
std::unique_ptr<T[]> scratch(int64_t n) {
  return std::unique_ptr<T[]>(new T[size_t(std::max<int64_t>(n, 1))]);
}

using detail::Carve;

// This thread's scratch of at least `bytes`: uninitialised, valid until this thread's next call.
std::byte* thread_scratch(size_t bytes) {
  thread_local detail::Scratch scratch;
  return static_cast<std::byte*>(scratch.get(bytes));
}

// y = a x                                                                                       x, y: [n]
template <typename T>
UOE_SIMD void scale_row(int64_t n, T a, const T* x, T* y) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] = x[j] * a;
}

// y += a x                                                                                      x, y: [n]
template <typename T>
UOE_SIMD void axpy_row(int64_t n, T a, const T* x, T* y) {
#pragma omp simd
  for (int64_t j = 0; j < n; ++j) y[j] += a * x[j];
}

// The SwiGLU activation A = silu(H_g) H_p, computed in compute_t<S> blocks (loops.h), stored in S.  hg, hp, a: [R]
template <typename S>
UOE_SIMD void swiglu_row(int64_t R, const S* hg, const S* hp, S* a) {
  using C = compute_t<S>;
  alignas(64) C bg[kBlock], bp[kBlock], out[kBlock];
  for (int64_t k = 0; k < R; k += kBlock) {
    const int64_t m = std::min(kBlock, R - k);
    load_block(bg, hg + k, 1, m);
    load_block(bp, hp + k, 1, m);
#pragma omp simd
    for (int64_t j = 0; j < m; ++j) out[j] = vm::silu(bg[j]) * bp[j];
    store_block(a + k, 1, out, m);
  }
}

// One row of the SwiGLU backward, computed in C = compute_t<S> blocks. In: hg = H_g, hp = H_p, g = dy W_d^T (not yet
// weighted), w = routing weight. Out: wa = w A (for dW_d = (w A)^T dY), dhg = w g H_p silu'(H_g),
// dhp = w g silu(H_g). Returns dw = <A, g> = <O, dy>.                          hg, hp, g, wa, dhg, dhp: [R]
template <typename S, typename C>
UOE_SIMD C swiglu_backward_row(int64_t R, C w, const S* hg, const S* hp, const C* g, S* wa, S* dhg, S* dhp) {
  alignas(64) C bh[kBlock], bp[kBlock], owa[kBlock], odg[kBlock], odp[kBlock];
  C dot = C(0);
  for (int64_t k = 0; k < R; k += kBlock) {
    const int64_t m = std::min(kBlock, R - k);
    load_block(bh, hg + k, 1, m);
    load_block(bp, hp + k, 1, m);
    const C* gk = g + k;
#pragma omp simd reduction(+ : dot)
    for (int64_t j = 0; j < m; ++j) {
      const C p = bp[j], gj = gk[j];
      C sl, dsl;  // silu(H_g), silu'(H_g)
      vm::silu_and_grad(bh[j], sl, dsl);
      const C a = sl * p;
      dot += a * gj;
      const C da = w * gj;
      owa[j] = w * a;
      odg[j] = da * p * dsl;
      odp[j] = da * sl;
    }
    store_block(wa + k, 1, owa, m);
    store_block(dhg + k, 1, odg, m);
    store_block(dhp + k, 1, odp, m);
  }
  return dot;
}

int64_t expert_of_row(const ExpertPlan& plan, int64_t row) {
  return int64_t(std::upper_bound(plan.offsets.begin(), plan.offsets.end(), row) - plan.offsets.begin()) - 1;
}

// Copies, per sorted row, x[t] into xs and (with gate) gate[t, e] (shared: gate[t, 0]) into gs.
//                                                                                     xs: [P, d], gs: [P, dg]
template <typename T>
void gather_pairs(const ExpertShape& s, const ExpertPlan& plan, const T* x, const T* gate, T* xs, T* gs) {
  for_rows(plan.rows(), s.d + s.dg, [&](int64_t i) {
    const int64_t t = plan.pair[size_t(i)] / s.K;
    std::memcpy(xs + i * s.d, x + t * s.d, size_t(s.d) * sizeof(T));
    if (gate) {
      const int64_t e = s.gate_shared ? 0 : expert_of_row(plan, i);
      std::memcpy(gs + i * s.dg, gate + (t * s.gate_rows() + e) * s.dg, size_t(s.dg) * sizeof(T));
    }
  });
}

// Zeroes the parts of the weight gradients outside the neuron range [r0, r1) (the GEMMs write the inside).
template <typename T>
void zero_outside_range(const ExpertShape& s, T* dwg, T* dwu, T* dwd) {
  const int64_t lo = s.r0, hi = s.D - s.r1;
  if (lo == 0 && hi == 0) return;
  auto cols = [&](T* w, int64_t rows) {  // w: [rows, D]
    if (!w) return;
    for_rows(rows, lo + hi, [&](int64_t i) {
      std::fill(w + i * s.D, w + i * s.D + lo, T(0));
      std::fill(w + i * s.D + s.r1, w + (i + 1) * s.D, T(0));
    });
  };
  cols(dwg, s.n * s.dg);
  cols(dwu, s.n * s.d);
  if (dwd)  // dwd: [n, D, d], rows outside [r0, r1) of every expert
    for_rows(s.n, (lo + hi) * s.d, [&](int64_t e) {
      std::fill(dwd + e * s.D * s.d, dwd + (e * s.D + s.r0) * s.d, T(0));
      std::fill(dwd + (e * s.D + s.r1) * s.d, dwd + (e + 1) * s.D * s.d, T(0));
    });
}

// C [M, N] = op(A) op(B) + beta C on operands of storage type S: the float GEMM for float and double, the bfloat16
// GEMM (float32 sums; C float32 or bfloat16) for bfloat16.
template <typename S, typename TC>
void expert_gemm(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda, const S* B, int64_t ldb,
                 compute_t<S> beta, TC* C, int64_t ldc) {
  if constexpr (std::is_same_v<S, BFloat16>)
    gemm_bf16<TC>(ta, tb, M, N, K, 1.0f, A, lda, B, ldb, beta, C, ldc);
  else
    gemm<S>(ta, tb, M, N, K, S(1), A, lda, B, ldb, beta, C, ldc);
}

// dst[0:n] = the sum add(acc) builds in acc (zeroed first): in place for float and double; for bfloat16 in a
// per-thread float32 row, rounded once.
template <typename S, typename Add>
void sum_into(int64_t n, S* dst, Add&& add) {
  using C = compute_t<S>;
  if constexpr (std::is_same_v<S, C>) {
    std::fill(dst, dst + n, C(0));
    add(dst);
  } else {
    thread_local std::vector<C> acc;
    acc.assign(size_t(n), C(0));
    add(acc.data());
    convert_f32_to_bf16(acc.data(), dst, n);
  }
}

// Runs body(e, buf) for every expert, buf an uninitialised per-thread scratch of `scratch_bytes`. With enough
// experts to keep every thread busy (n >= 4 * threads) experts run in parallel, largest first, each GEMM and row
// loop single-threaded; otherwise one expert at a time with the threads inside each GEMM and row loop (fewer
// experts than threads). Every expert writes only its own rows and weight slices and a GEMM gives the same bits
// on any thread count, so both ways give identical results.
template <typename F>
void for_experts(const ExpertPlan& plan, int64_t n, size_t scratch_bytes, F&& body) {
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (nt > 1 && n >= 4 * int64_t(nt)) {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::iota(order.begin(), order.end(), 0);
    auto rows = [&](int64_t e) { return plan.offsets[size_t(e + 1)] - plan.offsets[size_t(e)]; };
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rows(a) > rows(b); });
#pragma omp parallel num_threads(nt)
    {
      std::byte* buf = thread_scratch(scratch_bytes);
#pragma omp for schedule(dynamic, 1)
      for (int64_t i = 0; i < n; ++i) body(order[size_t(i)], buf);
    }
  } else {
    std::byte* buf = thread_scratch(scratch_bytes);
    for (int64_t e = 0; e < n; ++e) body(e, buf);
  }
}

// Ranking of experts: higher score first, NaN before any number, ties by lower index.
template <typename T>
bool ranks_before(const T* row, int64_t a, int64_t b) {
  const bool na = std::isnan(row[a]), nb = std::isnan(row[b]);
  if (na || nb) return na && (!nb || a < b);
  if (row[a] != row[b]) return row[a] > row[b];
  return a < b;
}

}  // namespace

// ---- routing ----------------------------------------------------------------------------------------------
template <typename T>
void route_forward(const RouteSpec& s, const T* scores, int64_t* indices, T* weights, T* probs) {
  const int64_t n = s.n, K = s.K;
#pragma omp parallel if (s.T * n >= 16384 && !omp_in_parallel())
  {
    std::vector<int64_t> order(static_cast<size_t>(n));
    std::vector<double> e(static_cast<size_t>(n));
#pragma omp for schedule(static)
    for (int64_t t = 0; t < s.T; ++t) {
      const T* row = scores + t * n;
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + K, order.end(),
                        [row](int64_t a, int64_t b) { return ranks_before(row, a, b); });
      // softmax over all n in double: p_i = e_i / z
      double mx = -std::numeric_limits<double>::infinity();
      for (int64_t i = 0; i < n; ++i) mx = std::max(mx, double(row[i]));
      double z = 0;
      for (int64_t i = 0; i < n; ++i) z += (e[size_t(i)] = std::exp(double(row[i]) - mx));
      if (probs)
        for (int64_t i = 0; i < n; ++i) probs[t * n + i] = T(e[size_t(i)] / z);
      int64_t c = K;  // number of selected experts
      if (s.p >= 0) {
        double cum = 0;
        for (c = 0; c < K;) {
          cum += e[size_t(order[size_t(c)])] / z;
          ++c;
          if (cum > s.p) break;
        }
      }
      double zs = 0;
      for (int64_t j = 0; j < c; ++j) zs += e[size_t(order[size_t(j)])];
      for (int64_t j = 0; j < K; ++j) {
        const int64_t i = order[size_t(j)];
        indices[t * K + j] = j < c ? i : -1;
        weights[t * K + j] = j < c ? T(e[size_t(i)] / (s.full_softmax ? z : zs)) : T(0);
      }
    }
  }
}

template <typename T>
void route_backward(const RouteSpec& s, const int64_t* indices, const T* weights, const T* probs, const T* dweights,
                    T* dscores) {
  const int64_t n = s.n, K = s.K;
  for_rows(s.T, n + K, [&](int64_t t) {
    const int64_t* idx = indices + t * K;
    const T *w = weights + t * K, *dw = dweights + t * K;
    T* ds = dscores + t * n;
    double dot = 0;  // sum_k w_k dw_k
    for (int64_t k = 0; k < K; ++k)
      if (idx[k] >= 0) dot += double(w[k]) * double(dw[k]);
    std::fill(ds, ds + n, T(0));
    if (s.full_softmax) {
      const T* p = probs + t * n;
      for (int64_t i = 0; i < n; ++i) ds[i] = T(-double(p[i]) * dot);
      for (int64_t k = 0; k < K; ++k)  // + p_i dp_i
        if (idx[k] >= 0) ds[idx[k]] = T(double(ds[idx[k]]) + double(p[idx[k]]) * double(dw[k]));
    } else {
      for (int64_t k = 0; k < K; ++k)
        if (idx[k] >= 0) ds[idx[k]] = T(double(ds[idx[k]]) + double(w[k]) * (double(dw[k]) - dot));
    }
  });
}

// ---- group L2 norm ----------------------------------------------------------------------------------------
// h stored as S, norms in T: float or double as they are, or a bfloat16 h with float norms, each group of h widened
// into this thread's scratch (the float kernel's arithmetic on it) and dh rounded once.
template <typename S, typename T>
void l2norm_forward(int64_t rows, int64_t groups, int64_t r, const S* h, T* norm) {
  for_rows(rows * groups, r, [&](int64_t i) {
    const T* v;
    if constexpr (std::is_same_v<S, T>) {
      v = h + i * r;
    } else {
      T* widened = reinterpret_cast<T*>(thread_scratch(size_t(r) * sizeof(T)));
      convert_bf16_to_f32_rows(h + i * r, r, 1, r, widened);
      v = widened;
    }
    norm[i] = T(std::sqrt(sum_of_squares(v, r)));
  });
}

template <typename S, typename T>
void l2norm_backward(int64_t rows, int64_t groups, int64_t r, const S* h, const T* norm, const T* dnorm, S* dh) {
  for_rows(rows * groups, r, [&](int64_t i) {
    const T scale = norm[i] == T(0) ? T(0) : dnorm[i] / norm[i];
    if constexpr (std::is_same_v<S, T>) {
      scale_row(r, scale, h + i * r, dh + i * r);
    } else {
      T* row = reinterpret_cast<T*>(thread_scratch(size_t(r) * sizeof(T)));
      convert_bf16_to_f32_rows(h + i * r, r, 1, r, row);
      scale_row(r, scale, row, row);
      convert_f32_to_bf16(row, dh + i * r, r);
    }
  });
}

template <typename T>
void group_l2norm_forward(int64_t rows, int64_t groups, int64_t r, const T* h, T* norm) {
  l2norm_forward(rows, groups, r, h, norm);
}

template <typename T>
void group_l2norm_backward(int64_t rows, int64_t groups, int64_t r, const T* h, const T* norm, const T* dnorm, T* dh) {
  l2norm_backward(rows, groups, r, h, norm, dnorm, dh);
}

void group_l2norm_forward_bf16(int64_t rows, int64_t groups, int64_t r, const BFloat16* h, float* norm) {
  l2norm_forward(rows, groups, r, h, norm);
}

void group_l2norm_backward_bf16(int64_t rows, int64_t groups, int64_t r, const BFloat16* h, const float* norm,
                                const float* dnorm, BFloat16* dh) {
  l2norm_backward(rows, groups, r, h, norm, dnorm, dh);
}

// ---- expert counts ----------------------------------------------------------------------------------------
void count_routed(const int64_t* indices, int64_t pairs, int64_t n, int64_t* counts) {
  std::fill(counts, counts + n, int64_t(0));
  for (int64_t i = 0; i < pairs; ++i)
    if (indices[i] >= 0) ++counts[indices[i]];
}

// ---- grouped SwiGLU experts -------------------------------------------------------------------------------
ExpertPlan plan_experts(const int64_t* indices, int64_t T, int64_t K, int64_t n) {
  ExpertPlan p;
  p.offsets.assign(size_t(n + 1), 0);
  p.row.assign(size_t(T * K), -1);
  for (int64_t i = 0; i < T * K; ++i)
    if (indices[i] >= 0) ++p.offsets[size_t(indices[i] + 1)];
  for (int64_t e = 0; e < n; ++e) {
    p.max_rows = std::max(p.max_rows, p.offsets[size_t(e + 1)]);
    p.offsets[size_t(e + 1)] += p.offsets[size_t(e)];
  }
  p.pair.resize(size_t(p.offsets.back()));
  std::vector<int64_t> next(p.offsets.begin(), p.offsets.end() - 1);
  for (int64_t i = 0; i < T * K; ++i) {  // pair ids ascending: token order kept within an expert
    if (indices[i] < 0) continue;
    const int64_t r = next[size_t(indices[i])]++;
    p.pair[size_t(r)] = i;
    p.row[size_t(i)] = r;
  }
  return p;
}

// Storage type S (inputs, weights, outputs, H_g, H_p and A), GEMM sums, SwiGLU and O in compute_t<S>.
template <typename S>
void expert_ffn_forward(const ExpertShape& s, const ExpertPlan& plan, const S* x, const S* gate, const S* weights,
                        const S* wg, const S* wu, const S* wd, S* y, S* h) {
  using C = compute_t<S>;
  const int64_t P = plan.rows(), R = s.r1 - s.r0, d = s.d, dg = s.dg, D = s.D;
  // Gathered inputs per sorted row.                                      xs: [P, d], gs: [P, dg], o: [P, d]
  auto xs = scratch<S>(P * d), gs = scratch<S>(gate ? P * dg : 0);
  auto o = scratch<C>(P * d);
  gather_pairs(s, plan, x, gate, xs.get(), gs.get());
  const S* G = gate ? gs.get() : xs.get();
  const int64_t mR = plan.max_rows * R;
  for_experts(plan, s.n, (h ? 1 : 3) * Carve::bytes<S>(mR), [&](int64_t e, std::byte* buf) {
    const int64_t off = plan.offsets[size_t(e)], m = plan.offsets[size_t(e + 1)] - off;
    if (m == 0) return;
    Carve runs{buf};
    S* a = runs.take<S>(mR);  // [m, R]
    // H_g, H_p [m, R]: kept in h for the backward, or in scratch
    S* hg = h ? h + off * R : runs.take<S>(mR);
    S* hp = h ? h + (P + off) * R : runs.take<S>(mR);
    // H_g = G_e Wg[e][:, r0:r1], H_p = X_e Wu[e][:, r0:r1]: column slices through the leading dimension D.
    expert_gemm<S>(false, false, m, R, dg, G + off * dg, dg, wg + e * dg * D + s.r0, D, C(0), hg, R);
    expert_gemm<S>(false, false, m, R, d, xs.get() + off * d, d, wu + e * d * D + s.r0, D, C(0), hp, R);
    for_rows(m, R, [&](int64_t i) { swiglu_row(R, hg + i * R, hp + i * R, a + i * R); });  // A = silu(H_g) H_p
    // O_e = A Wd[e][r0:r1, :]                                                                         [m, d]
    expert_gemm<S>(false, false, m, d, R, a, R, wd + (e * D + s.r0) * d, d, C(0), o.get() + off * d, d);
  });
  // y_t = sum_k w_{t,k} O_{pair(t,k)}, summed in k order by the token's one thread.
  for_rows(s.T, s.K * d, [&](int64_t t) {
    sum_into(d, y + t * d, [&](C* yt) {
      for (int64_t k = 0; k < s.K; ++k) {
        const int64_t r = plan.row[size_t(t * s.K + k)];
        if (r >= 0) axpy_row(d, C(weights[t * s.K + k]), o.get() + r * d, yt);
      }
    });
  });
}

// Storage type S (inputs, weights, gradients, the GEMM operands), sums and SwiGLU in compute_t<S>; weight gradients
// written in S by the GEMMs.
template <typename S>
void expert_ffn_backward(const ExpertShape& s, const ExpertPlan& plan, const S* x, const S* gate, const S* weights,
                         const S* wg, const S* wu, const S* wd, const S* h, const S* dy, S* dx, S* dweights,
                         S* dgate, S* dwg, S* dwu, S* dwd) {
  using C = compute_t<S>;
  const int64_t P = plan.rows(), R = s.r1 - s.r0, d = s.d, dg = s.dg, D = s.D, K = s.K;
  if (!gate) dgate = nullptr;
  // Gathered per sorted row: inputs, dy and the routing weight.    xs, dys, dxs: [P, d]; gs, dgs: [P, dg]; ws: [P]
  auto xs = scratch<S>(P * d), gs = scratch<S>(gate ? P * dg : 0), dys = scratch<S>(P * d);
  auto ws = scratch<C>(P), dxs = scratch<C>(dx ? P * d : 0), dgs = scratch<C>(dgate ? P * dg : 0);
  gather_pairs(s, plan, x, gate, xs.get(), gs.get());
  for_rows(P, d, [&](int64_t i) {
    const int64_t pr = plan.pair[size_t(i)];
    std::memcpy(dys.get() + i * d, dy + (pr / K) * d, size_t(d) * sizeof(S));
    ws[i] = C(weights[pr]);
  });
  const S* G = gate ? gs.get() : xs.get();
  const int64_t mR = plan.max_rows * R;
  const size_t scratch_bytes = Carve::bytes<C>(mR) + 3 * Carve::bytes<S>(mR);
  for_experts(plan, s.n, scratch_bytes, [&](int64_t e, std::byte* buf) {
    const int64_t off = plan.offsets[size_t(e)], m = plan.offsets[size_t(e + 1)] - off;
    const S *Ge = G + off * dg, *Xe = xs.get() + off * d, *dYe = dys.get() + off * d;
    const S *hg = h + off * R, *hp = h + (P + off) * R;  // the forward's H_g, H_p [m, R]
    const S *wge = wg + e * dg * D + s.r0, *wue = wu + e * d * D + s.r0, *wde = wd + (e * D + s.r0) * d;
    Carve runs{buf};
    C* gb = runs.take<C>(mR);
    S *wa = runs.take<S>(mR), *dhg = runs.take<S>(mR), *dhp = runs.take<S>(mR);  // [m, R] each
    if (m > 0) {
      // gb = dY_e Wd[e][r0:r1, :]^T; then w A, dH_g, dH_p and dw_{t,k} = <A, dY Wd^T> = <O, dy_t>
      expert_gemm<S>(false, true, m, R, d, dYe, d, wde, d, C(0), gb, R);
      for_rows(m, R, [&](int64_t i) {
        const int64_t j = i * R;
        const C dwv = swiglu_backward_row(R, ws[off + i], hg + j, hp + j, gb + j, wa + j, dhg + j, dhp + j);
        if (dweights) dweights[plan.pair[size_t(off + i)]] = S(dwv);
      });
    }
    // Weight gradients sum over this expert's rows in token order (m == 0: the GEMM writes zeros).
    if (dwd) expert_gemm<S>(true, false, R, d, m, wa, R, dYe, d, C(0), dwd + (e * D + s.r0) * d, d);
    if (dwg) expert_gemm<S>(true, false, dg, R, m, Ge, dg, dhg, R, C(0), dwg + e * dg * D + s.r0, D);
    if (dwu) expert_gemm<S>(true, false, d, R, m, Xe, d, dhp, R, C(0), dwu + e * d * D + s.r0, D);
    if (m == 0) return;
    // dX_e = dH_p Wu[e][:, r0:r1]^T (+ dH_g Wg[e][:, r0:r1]^T, or that term into dG_e with a gate input)
    if (dx) expert_gemm<S>(false, true, m, d, R, dhp, R, wue, D, C(0), dxs.get() + off * d, d);
    if (dgate)
      expert_gemm<S>(false, true, m, dg, R, dhg, R, wge, D, C(0), dgs.get() + off * dg, dg);
    else if (dx && !gate)
      expert_gemm<S>(false, true, m, d, R, dhg, R, wge, D, C(1), dxs.get() + off * d, d);
  });
  zero_outside_range(s, dwg, dwu, dwd);
  if (dweights)
    for (int64_t i = 0; i < s.T * K; ++i)
      if (plan.row[size_t(i)] < 0) dweights[i] = S(0);
  // Scatter back per token, slots in k order.
  if (dx)
    for_rows(s.T, K * d, [&](int64_t t) {
      sum_into(d, dx + t * d, [&](C* g) {
        for (int64_t k = 0; k < K; ++k) {
          const int64_t r = plan.row[size_t(t * K + k)];
          if (r >= 0) axpy_row(d, C(1), dxs.get() + r * d, g);
        }
      });
    });
  if (dgate) {
    const int64_t gn = s.gate_rows();
    for_rows(s.T, gn * dg, [&](int64_t t) {
      sum_into(gn * dg, dgate + t * gn * dg, [&](C* g) {
        for (int64_t k = 0; k < K; ++k) {
          const int64_t r = plan.row[size_t(t * K + k)];
          if (r >= 0)
            axpy_row(dg, C(1), dgs.get() + r * dg, g + (s.gate_shared ? 0 : expert_of_row(plan, r)) * dg);
        }
      });
    });
  }
}

#define UOE_EXPERT_FFN_INSTANTIATE(T)                                                                                 \
  template void expert_ffn_forward<T>(const ExpertShape&, const ExpertPlan&, const T*, const T*, const T*, const T*,  \
                                      const T*, const T*, T*, T*);                                                    \
  template void expert_ffn_backward<T>(const ExpertShape&, const ExpertPlan&, const T*, const T*, const T*, const T*, \
                                       const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, T*);
#define UOE_EXPERT_INSTANTIATE(T)                                                                                     \
  template void route_forward<T>(const RouteSpec&, const T*, int64_t*, T*, T*);                                       \
  template void route_backward<T>(const RouteSpec&, const int64_t*, const T*, const T*, const T*, T*);                \
  template void group_l2norm_forward<T>(int64_t, int64_t, int64_t, const T*, T*);                                     \
  template void group_l2norm_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*);                \
  UOE_EXPERT_FFN_INSTANTIATE(T)
UOE_EXPERT_INSTANTIATE(float)
UOE_EXPERT_INSTANTIATE(double)
#undef UOE_EXPERT_INSTANTIATE
#undef UOE_EXPERT_FFN_INSTANTIATE

void expert_ffn_forward_bf16(const ExpertShape& s, const ExpertPlan& plan, const BFloat16* x, const BFloat16* gate,
                             const BFloat16* weights, const BFloat16* wg, const BFloat16* wu, const BFloat16* wd,
                             BFloat16* y, BFloat16* h) {
  expert_ffn_forward<BFloat16>(s, plan, x, gate, weights, wg, wu, wd, y, h);
}

void expert_ffn_backward_bf16(const ExpertShape& s, const ExpertPlan& plan, const BFloat16* x, const BFloat16* gate,
                              const BFloat16* weights, const BFloat16* wg, const BFloat16* wu, const BFloat16* wd,
                              const BFloat16* h, const BFloat16* dy, BFloat16* dx, BFloat16* dweights,
                              BFloat16* dgate, BFloat16* dwg, BFloat16* dwu, BFloat16* dwd) {
  expert_ffn_backward<BFloat16>(s, plan, x, gate, weights, wg, wu, wd, h, dy, dx, dweights, dgate, dwg, dwu, dwd);
}

}  // namespace uoe::cpu
