// uoe::cpu MoE kernels: top-k / top-p routing, group L2 norm, expert counts, dropless grouped SwiGLU experts.
#pragma once
#include <cstdint>
#include <vector>

#include "core/half.h"

// Conventions shared by every kernel below:
//  * All arrays are contiguous row-major; indices are int64 with -1 marking an empty slot and are validated by
//    the caller (every other value lies in [0, n)). Outputs are overwritten, never accumulated into; an output
//    pointer documented as nullable is skipped when null.
//  * Instantiated for T = float and T = double; expert_ffn also for T = BFloat16 (bfloat16 GEMMs summing in
//    float32, the SwiGLU and the sums over slots in float32, results rounded once). Float SwiGLU math uses
//    uoe::cpu::vm (vectorised, ISA-dispatched).
//  * Threads: OpenMP over output rows (tokens, sorted pairs, weight rows), and for the experts either over experts
//    (n >= 4 * threads, single-threaded GEMMs) or inside the packed uoe::cpu::gemm (itself thread-count
//    independent). No element is ever summed into by two threads and every sum has a fixed order, so results are
//    bit-identical whatever the thread count.
//  * Memory: expert_ffn allocates its gathered rows per call and keeps, per thread, one scratch of
//    3 * (rows of the largest expert) * (r1 - r0) elements between calls (no page faults on every call).
namespace uoe::cpu {

// ---- routing ----------------------------------------------------------------------------------------------
// Per token t, experts are ranked by score (descending; ties: lower index first; NaN ranks first).
//   top-k (p < 0): the first K experts.
//   top-p (p >= 0): the first c experts, c the smallest count whose cumulative probability exceeds p, clamped
//                   to [1, K]; slots c..K-1 get index -1 and weight 0.
// weights: full_softmax: p_i = softmax(scores_t)_i of each selected expert; else renormalised over the
// selected: exp(s_i) / sum_{j selected} exp(s_j).                 scores, probs: [T, n]; indices, weights: [T, K]
// probs (nullable) receives softmax(scores) (the backward of full_softmax needs it).
struct RouteSpec {
  int64_t T, n, K;
  double p;  // < 0: top-k
  bool full_softmax;
};
template <typename T>
void route_forward(const RouteSpec& s, const T* scores, int64_t* indices, T* weights, T* probs);
// renormalised:  ds_{I_k} = w_k (dw_k - sum_j w_j dw_j), 0 for unselected experts;
// full_softmax:  ds_i = p_i (dp_i - sum_k w_k dw_k),  dp_i = sum_{k: I_k = i} dw_k.  dscores: [T, n]
template <typename T>
void route_backward(const RouteSpec& s, const int64_t* indices, const T* weights, const T* probs, const T* dweights,
                    T* dscores);

// ---- group L2 norm: h [rows, groups*r] -> norm [rows, groups] ----------------------------------------------
template <typename T>
void group_l2norm_forward(int64_t rows, int64_t groups, int64_t r, const T* h, T* norm);
// dh = dnorm * h / norm, 0 where norm == 0.
template <typename T>
void group_l2norm_backward(int64_t rows, int64_t groups, int64_t r, const T* h, const T* norm, const T* dnorm, T* dh);

// ---- expert counts ----------------------------------------------------------------------------------------
// counts[i] = number of (token, slot) pairs routed to expert i (n entries; empty slots -1 not counted).
void count_routed(const int64_t* indices, int64_t pairs, int64_t n, int64_t* counts);

// ---- dropless grouped SwiGLU experts ----------------------------------------------------------------------
// y_t = sum_k w_{t,k} (silu(g_{t,e} Wg[e][:, r0:r1]) * (x_t Wu[e][:, r0:r1])) Wd[e][r0:r1, :],  e = I[t,k].
// x: [T, d]; gate (nullable, else g = x and dg = d): [T, gn, dg] with gn = n (g_{t,e} = gate[t, e]) or, when
// gate_shared, gn = 1 (g_{t,e} = gate[t, 0]); weights, indices: [T, K]; wg: [n, dg, D]; wu: [n, d, D];
// wd: [n, D, d]; y: [T, d].
struct ExpertShape {
  int64_t T, K, n, d, dg, D, r0, r1;
  bool gate_shared;
  int64_t gate_rows() const { return gate_shared ? 1 : n; }  // gn
};

// The (token, slot) pairs sorted by expert (stable counting sort: token order kept inside an expert).
struct ExpertPlan {
  std::vector<int64_t> offsets;  // [n + 1]: expert e owns sorted rows [offsets[e], offsets[e + 1])
  std::vector<int64_t> pair;     // [rows]: sorted row -> pair id t*K + k
  std::vector<int64_t> row;      // [T*K]: pair id -> sorted row, -1 for an empty slot
  int64_t max_rows = 0;          // largest number of rows of one expert
  int64_t rows() const { return offsets.back(); }
};
ExpertPlan plan_experts(const int64_t* indices, int64_t T, int64_t K, int64_t n);

template <typename T>
void expert_ffn_forward(const ExpertShape& s, const ExpertPlan& plan, const T* x, const T* gate, const T* weights,
                        const T* wg, const T* wu, const T* wd, T* y);

// Recomputes H_g, H_p from the inputs. Outputs (each nullable): dx [T, d], dweights [T, K] (0 in empty slots),
// dgate [T, gn, dg] (0 for unselected experts; shared: summed over the slots; only with gate), dwg [n, dg, D], dwu [n, d, D], dwd [n, D, d]
// (0 outside the neuron range [r0, r1)).
template <typename T>
void expert_ffn_backward(const ExpertShape& s, const ExpertPlan& plan, const T* x, const T* gate, const T* weights,
                         const T* wg, const T* wu, const T* wd, const T* dy, T* dx, T* dweights, T* dgate, T* dwg,
                         T* dwu, T* dwd);

#define UOE_EXPERT_FFN_EXTERN(T)                                                                                   \
  extern template void expert_ffn_forward<T>(const ExpertShape&, const ExpertPlan&, const T*, const T*, const T*,  \
                                             const T*, const T*, const T*, T*);                                    \
  extern template void expert_ffn_backward<T>(const ExpertShape&, const ExpertPlan&, const T*, const T*, const T*, \
                                              const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, T*);
#define UOE_EXPERT_EXTERN(T)                                                                                       \
  extern template void route_forward<T>(const RouteSpec&, const T*, int64_t*, T*, T*);                             \
  extern template void route_backward<T>(const RouteSpec&, const int64_t*, const T*, const T*, const T*, T*);      \
  extern template void group_l2norm_forward<T>(int64_t, int64_t, int64_t, const T*, T*);                           \
  extern template void group_l2norm_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*);      \
  UOE_EXPERT_FFN_EXTERN(T)
UOE_EXPERT_EXTERN(float)
UOE_EXPERT_EXTERN(double)
UOE_EXPERT_FFN_EXTERN(BFloat16)
#undef UOE_EXPERT_EXTERN
#undef UOE_EXPERT_FFN_EXTERN

}  // namespace uoe::cpu
