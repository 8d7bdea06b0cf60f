// The MoE kernel family (routing and experts), one declaration list for both backends: top-k / top-p routing, group
// L2 norm, expert counts, the expert plan and dropless grouped SwiGLU experts; the GPU's experts also natively in
// bfloat16. Implemented in ops/cpu/moe_kernels.cpp (host pointers) and cuda/moe_routing.cu, cuda/moe_plan.cu,
// cuda/moe_experts.cu (device pointers); a build without CUDA links stubs that raise (cuda/stub/). Callers pick the
// backend with UOE_KERNEL (ops/backend.h).
//
// Conventions shared by every kernel below:
//  * All arrays are contiguous row-major; indices are int64 with -1 marking an empty slot and are validated by
//    the caller (every other value lies in [0, n)). Outputs are overwritten, never accumulated into; an output
//    pointer documented as nullable is skipped when null.
//  * Instantiated for T = float and T = double.
//  * The plan is the one type that differs between the backends: the CPU sorts the routed slots on the host
//    (ExpertPlan), the GPU on the device (DeviceExpertPlan, whose only copy to the host is each expert's row count,
//    what the grouped GEMMs need). Each backend's plan_experts returns its own, and its experts take it.
//  * Deterministic: every sum has a fixed order (per token, slots in k order; per expert, GEMMs over its contiguous
//    row block) and no floating-point atomics, so results are bit-identical whatever the thread count or grid.
//    The backends agree within rounding, not bit for bit (other summation trees, cuBLAS GEMMs).
//  * CPU: OpenMP over output rows (tokens, sorted pairs, weight rows), and for the experts either over experts
//    (n >= 4 * threads, single-threaded GEMMs) or inside the packed cpu::gemm; float SwiGLU math uses
//    uoe::cpu::vm (vectorised, ISA-dispatched). expert_ffn allocates its gathered rows per call and keeps, per
//    thread, one scratch of 3 * (rows of the largest expert) * (r1 - r0) elements between calls.
//  * GPU: work on cuda::current_stream of the current device; calls return before the kernels finish (the plan
//    alone waits, for the row counts it copies back). Routing: one thread per token, softmax in double as on the
//    CPU. The experts: pairs gathered into expert-contiguous rows (one kernel), grouped GEMMs on each row block,
//    SwiGLU in one fused elementwise kernel, and a per-token combine.
#pragma once
#include <cstdint>
#include <vector>

#include "core/half.h"
#include "core/tensor.h"

namespace uoe::kernels {

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

// The CPU's plan: the (token, slot) pairs sorted by expert (stable counting sort: token order kept inside an
// expert), on the host.
struct ExpertPlan {
  std::vector<int64_t> offsets;  // [n + 1]: expert e owns sorted rows [offsets[e], offsets[e + 1])
  std::vector<int64_t> pair;     // [rows]: sorted row -> pair id t*K + k
  std::vector<int64_t> row;      // [T*K]: pair id -> sorted row, -1 for an empty slot
  int64_t max_rows = 0;          // largest number of rows of one expert
  int64_t rows() const { return offsets.back(); }
};

// The GPU's plan: ExpertPlan's content, sorted on the device.
struct DeviceExpertPlan {
  std::vector<int64_t> offsets;  // [n + 1], host: expert e owns sorted rows [offsets[e], offsets[e + 1])
  Tensor storage;                // int64 on the GPU: pair [rows] (row -> slot t*K + k), row [T*K] (slot -> row,
                                 // -1 for an empty slot), row_expert [rows] (row -> expert)
  int64_t bad_slot = -1;         // the first slot whose index is outside [-1, n); the plan is empty then
  int64_t bad_index = 0;         // and its index
  int64_t rows() const { return offsets.empty() ? 0 : offsets.back(); }
};

}  // namespace uoe::kernels

#define UOE_MOE_EXTERN(T, Plan)                                                                                     \
  extern template void route_forward<T>(const RouteSpec&, const T*, int64_t*, T*, T*);                             \
  extern template void route_backward<T>(const RouteSpec&, const int64_t*, const T*, const T*, const T*, T*);      \
  extern template void group_l2norm_forward<T>(int64_t, int64_t, int64_t, const T*, T*);                           \
  extern template void group_l2norm_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*);      \
  extern template void expert_ffn_forward<T>(const ExpertShape&, const Plan&, const T*, const T*, const T*,        \
                                             const T*, const T*, const T*, T*, T*);                                \
  extern template void expert_ffn_backward<T>(const ExpertShape&, const Plan&, const T*, const T*, const T*,       \
                                              const T*, const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, \
                                              T*);

// The family's declarations, the same in both backends' namespaces; Plan is the backend's plan type.
#define UOE_MOE_KERNELS(Plan)                                                                                       \
  using kernels::DeviceExpertPlan;                                                                                  \
  using kernels::ExpertPlan;                                                                                        \
  using kernels::ExpertShape;                                                                                       \
  using kernels::RouteSpec;                                                                                         \
  template <typename T>                                                                                             \
  void route_forward(const RouteSpec& s, const T* scores, int64_t* indices, T* weights, T* probs);                  \
  /* renormalised:  ds_{I_k} = w_k (dw_k - sum_j w_j dw_j), 0 for unselected experts;                               \
     full_softmax:  ds_i = p_i (dp_i - sum_k w_k dw_k),  dp_i = sum_{k: I_k = i} dw_k.  dscores: [T, n] */          \
  template <typename T>                                                                                             \
  void route_backward(const RouteSpec& s, const int64_t* indices, const T* weights, const T* probs,                 \
                      const T* dweights, T* dscores);                                                               \
  /* group L2 norm: h [rows, groups*r] -> norm [rows, groups]; backward: dh = dnorm * h / norm, 0 where norm == 0 */ \
  template <typename T>                                                                                             \
  void group_l2norm_forward(int64_t rows, int64_t groups, int64_t r, const T* h, T* norm);                          \
  template <typename T>                                                                                             \
  void group_l2norm_backward(int64_t rows, int64_t groups, int64_t r, const T* h, const T* norm, const T* dnorm,   \
                             T* dh);                                                                                \
  /* The same of a bfloat16 h, read as it is, with float32 norms (UoE's routing scores): the bits of the float      \
     kernels on h widened, dh rounded once to bfloat16. */                                                          \
  void group_l2norm_forward_bf16(int64_t rows, int64_t groups, int64_t r, const BFloat16* h, float* norm);          \
  void group_l2norm_backward_bf16(int64_t rows, int64_t groups, int64_t r, const BFloat16* h, const float* norm,   \
                                  const float* dnorm, BFloat16* dh);                                                \
  /* counts[i] = number of (token, slot) pairs routed to expert i (n entries; empty slots -1 not counted). The GPU  \
     takes n <= 4096 and leaves out indices outside [-1, n) without reporting them (the caller checks them where    \
     it can afford a host copy). */                                                                                 \
  void count_routed(const int64_t* indices, int64_t pairs, int64_t n, int64_t* counts);                             \
  /* indices: [T, K] (-1 = empty slot). The GPU's takes n <= 4096 experts, counts the slots per expert on the       \
     device (copied back: one synchronisation), then sorts them there, and reports a bad index in bad_slot. */      \
  Plan plan_experts(const int64_t* indices, int64_t T, int64_t K, int64_t n);                                       \
  /* h (nullable): H_g [P, R] then H_p [P, R] of the P = plan.rows() sorted rows, R = r1 - r0, kept for the        \
     backward (without it they live in scratch). */                                                                 \
  template <typename T>                                                                                             \
  void expert_ffn_forward(const ExpertShape& s, const Plan& plan, const T* x, const T* gate, const T* weights,      \
                          const T* wg, const T* wu, const T* wd, T* y, T* h);                                       \
  /* h: the forward's H_g, H_p (read only). Outputs (each nullable): dx [T, d], dweights [T, K] (0 in empty slots), \
     dgate [T, gn, dg] (0 for unselected experts; shared: summed over the slots; only with gate), dwg [n, dg, D],   \
     dwu [n, d, D], dwd [n, D, d] (0 outside the neuron range [r0, r1)). */                                         \
  template <typename T>                                                                                             \
  void expert_ffn_backward(const ExpertShape& s, const Plan& plan, const T* x, const T* gate, const T* weights,     \
                           const T* wg, const T* wu, const T* wd, const T* h, const T* dy, T* dx, T* dweights,      \
                           T* dgate, T* dwg, T* dwu, T* dwd);                                                       \
  /* The experts on bfloat16 storage: bfloat16 GEMMs with float32 accumulation, SwiGLU, combine and the per-token  \
     sums computed in float32, results rounded once; activations between the GEMMs (H_g, H_p, their gradients and  \
     A = silu(H_g) H_p) kept in bfloat16. */                                                                        \
  void expert_ffn_forward_bf16(const ExpertShape& s, const Plan& plan, const BFloat16* x, const BFloat16* gate,     \
                               const BFloat16* weights, const BFloat16* wg, const BFloat16* wu, const BFloat16* wd, \
                               BFloat16* y, BFloat16* h);                                                           \
  void expert_ffn_backward_bf16(const ExpertShape& s, const Plan& plan, const BFloat16* x, const BFloat16* gate,    \
                                const BFloat16* weights, const BFloat16* wg, const BFloat16* wu,                    \
                                const BFloat16* wd, const BFloat16* h, const BFloat16* dy, BFloat16* dx,            \
                                BFloat16* dweights, BFloat16* dgate, BFloat16* dwg, BFloat16* dwu, BFloat16* dwd);  \
  UOE_MOE_EXTERN(float, Plan)                                                                                       \
  UOE_MOE_EXTERN(double, Plan)

namespace uoe::cpu {
UOE_MOE_KERNELS(ExpertPlan)
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_MOE_KERNELS(DeviceExpertPlan)
}  // namespace uoe::cuda

#undef UOE_MOE_KERNELS
#undef UOE_MOE_EXTERN
