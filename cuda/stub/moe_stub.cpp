// CPU-only build: the CUDA MoE kernels (ops/kernels/moe.h) exist and raise, naming the op. Unreachable from the
// library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/moe.h"

namespace uoe::cuda {

template <typename T>
void route_forward(const RouteSpec& s, const T*, int64_t*, T*, T*) {
  no_cuda(s.p < 0 ? "topk_route" : "topp_route");
}
template <typename T>
void route_backward(const RouteSpec& s, const int64_t*, const T*, const T*, const T*, T*) {
  no_cuda(s.p < 0 ? "topk_route" : "topp_route");
}
template <typename T>
void group_l2norm_forward(int64_t, int64_t, int64_t, const T*, T*) {
  no_cuda("group_l2norm");
}
template <typename T>
void group_l2norm_backward(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*) {
  no_cuda("group_l2norm");
}
void group_l2norm_forward_bf16(int64_t, int64_t, int64_t, const BFloat16*, float*) { no_cuda("group_l2norm"); }
void group_l2norm_backward_bf16(int64_t, int64_t, int64_t, const BFloat16*, const float*, const float*, BFloat16*) {
  no_cuda("group_l2norm");
}
void count_routed(const int64_t*, int64_t, int64_t, int64_t*) { no_cuda("count_routed"); }
DeviceExpertPlan plan_experts(const int64_t*, int64_t, int64_t, int64_t) { no_cuda("expert_ffn"); }
template <typename T>
void expert_ffn_forward(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*, const T*, const T*,
                        const T*, T*, T*) {
  no_cuda("expert_ffn");
}
template <typename T>
void expert_ffn_backward(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*, const T*, const T*,
                         const T*, const T*, const T*, T*, T*, T*, T*, T*, T*) {
  no_cuda("expert_ffn");
}

#define UOE_MOE_STUBS(T)                                                                                           \
  template void route_forward<T>(const RouteSpec&, const T*, int64_t*, T*, T*);                                    \
  template void route_backward<T>(const RouteSpec&, const int64_t*, const T*, const T*, const T*, T*);             \
  template void group_l2norm_forward<T>(int64_t, int64_t, int64_t, const T*, T*);                                  \
  template void group_l2norm_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*);             \
  template void expert_ffn_forward<T>(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*,   \
                                      const T*, const T*, const T*, T*, T*);                                       \
  template void expert_ffn_backward<T>(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*,  \
                                       const T*, const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, T*);
UOE_MOE_STUBS(float)
UOE_MOE_STUBS(double)
#undef UOE_MOE_STUBS

void expert_ffn_forward_bf16(const ExpertShape&, const DeviceExpertPlan&, const BFloat16*, const BFloat16*,
                             const BFloat16*, const BFloat16*, const BFloat16*, const BFloat16*, BFloat16*,
                             BFloat16*) {
  no_cuda("expert_ffn");
}
void expert_ffn_backward_bf16(const ExpertShape&, const DeviceExpertPlan&, const BFloat16*, const BFloat16*,
                              const BFloat16*, const BFloat16*, const BFloat16*, const BFloat16*, const BFloat16*,
                              const BFloat16*, BFloat16*, BFloat16*, BFloat16*, BFloat16*, BFloat16*, BFloat16*) {
  no_cuda("expert_ffn");
}

}  // namespace uoe::cuda
