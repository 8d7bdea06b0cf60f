// uoe::cuda MoE kernels: the CUDA mirror of ops/cpu/expert_kernels.h (routing, group L2 norm, expert counts,
// dropless grouped SwiGLU experts), name for name and signature for signature, on device pointers; the experts
// also natively in bfloat16.
// Defined in cuda/routing_kernels.cu (routing, group L2 norm), cuda/expert_plan.cu (expert counts, the plan) and
// cuda/expert_ffn.cu (the experts).
#pragma once
#include <cstdint>

#include <vector>

#include "core/half.h"
#include "core/tensor.h"
#include "ops/cpu/expert_kernels.h"

// Conventions (besides those of ops/cpu/expert_kernels.h, whose semantics every kernel here repeats):
//  * Array pointers are device pointers on the current CUDA device, except where a comment says "host".
//    Work is issued to cuda::current_stream(current device); calls return before the kernels finish (the expert
//    plan alone waits, for the row counts it copies back).
//  * The experts take a DeviceExpertPlan (cuda::plan_experts): the CPU's plan built on the GPU, whose only copy
//    to the host is what the grouped GEMMs need, the number of rows of each expert. (The CPU kernels take the
//    host cpu::ExpertPlan instead: the one place where the signatures differ.)
//  * Deterministic: no atomics on floating-point data; every sum has a fixed order (per token, slots in k
//    order; per expert, GEMMs over its contiguous row block), so repeated runs give identical bits.
//    Results equal the CPU's within rounding, not bit for bit (other summation trees, cuBLAS GEMMs).
namespace uoe::cuda {

using cpu::ExpertShape;
using cpu::RouteSpec;

// ---- routing: one thread per token (ranking, softmax in double as on the CPU) ------------------------------
template <typename T>
void route_forward(const RouteSpec& s, const T* scores, int64_t* indices, T* weights, T* probs);
template <typename T>
void route_backward(const RouteSpec& s, const int64_t* indices, const T* weights, const T* probs, const T* dweights,
                    T* dscores);

// ---- group L2 norm ---------------------------------------------------------------------------------------
template <typename T>
void group_l2norm_forward(int64_t rows, int64_t groups, int64_t r, const T* h, T* norm);
template <typename T>
void group_l2norm_backward(int64_t rows, int64_t groups, int64_t r, const T* h, const T* norm, const T* dnorm, T* dh);

// ---- expert counts ----------------------------------------------------------------------------------------
// counts: device, n <= 4096 entries. Indices outside [-1, n) are not counted here (and not reported: the caller
// checks them where it can afford a host copy).
void count_routed(const int64_t* indices, int64_t pairs, int64_t n, int64_t* counts);

// ---- the expert plan, on the device ----------------------------------------------------------------------
// cpu::ExpertPlan's content: the (token, slot) pairs sorted by expert, stable (slot order inside an expert).
struct DeviceExpertPlan {
  std::vector<int64_t> offsets;  // [n + 1], host: expert e owns sorted rows [offsets[e], offsets[e + 1])
  Tensor storage;                // int64 on the GPU: pair [rows] (row -> slot t*K + k), row [T*K] (slot -> row,
                                 // -1 for an empty slot), row_expert [rows] (row -> expert)
  int64_t bad_slot = -1;         // the first slot whose index is outside [-1, n); the plan is empty then
  int64_t bad_index = 0;         // and its index
  int64_t rows() const { return offsets.empty() ? 0 : offsets.back(); }
};
// indices: [T, K] int64 on the current GPU (-1 = empty slot), n <= 4096 experts. Counts the slots per expert on
// the device (copied back: one synchronisation), then sorts them there. A bad index is reported in bad_slot.
DeviceExpertPlan plan_experts(const int64_t* indices, int64_t T, int64_t K, int64_t n);

// ---- dropless grouped SwiGLU experts ----------------------------------------------------------------------
// Pairs gathered into expert-contiguous rows (one kernel), per-expert cuda::gemm on each row block, SwiGLU in
// one fused elementwise kernel, and a per-token combine (slots summed in k order, no atomics).
template <typename T>
void expert_ffn_forward(const ExpertShape& s, const DeviceExpertPlan& plan, const T* x, const T* gate, const T* weights,
                        const T* wg, const T* wu, const T* wd, T* y);
template <typename T>
void expert_ffn_backward(const ExpertShape& s, const DeviceExpertPlan& plan, const T* x, const T* gate, const T* weights,
                         const T* wg, const T* wu, const T* wd, const T* dy, T* dx, T* dweights, T* dgate, T* dwg,
                         T* dwu, T* dwd);
// The same on bfloat16 storage: bfloat16 GEMMs with float32 accumulation (cuda::gemm_bf16), SwiGLU, combine and
// the per-token sums computed in float32; activations between the GEMMs are kept in bfloat16.
void expert_ffn_forward_bf16(const ExpertShape& s, const DeviceExpertPlan& plan, const BFloat16* x, const BFloat16* gate,
                             const BFloat16* weights, const BFloat16* wg, const BFloat16* wu, const BFloat16* wd,
                             BFloat16* y);
void expert_ffn_backward_bf16(const ExpertShape& s, const DeviceExpertPlan& plan, const BFloat16* x, const BFloat16* gate,
                              const BFloat16* weights, const BFloat16* wg, const BFloat16* wu, const BFloat16* wd,
                              const BFloat16* dy, BFloat16* dx, BFloat16* dweights, BFloat16* dgate, BFloat16* dwg,
                              BFloat16* dwu, BFloat16* dwd);

#define UOE_CUDA_EXPERT_EXTERN(T)                                                                                  \
  extern template void route_forward<T>(const RouteSpec&, const T*, int64_t*, T*, T*);                             \
  extern template void route_backward<T>(const RouteSpec&, const int64_t*, const T*, const T*, const T*, T*);      \
  extern template void group_l2norm_forward<T>(int64_t, int64_t, int64_t, const T*, T*);                           \
  extern template void group_l2norm_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*);      \
  extern template void expert_ffn_forward<T>(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*,  \
                                             const T*, const T*, const T*, T*);                                    \
  extern template void expert_ffn_backward<T>(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*, \
                                              const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, T*);
UOE_CUDA_EXPERT_EXTERN(float)
UOE_CUDA_EXPERT_EXTERN(double)
#undef UOE_CUDA_EXPERT_EXTERN

}  // namespace uoe::cuda
