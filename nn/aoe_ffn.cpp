// Autonomy-of-Experts FFN (docs/UOE.md): a factorised gate whose first factor ranks the experts; optional shared
// expert.
#include "nn/ffn.h"
#include "ops/ops.h"

namespace uoe::nn {

AoeFfn::AoeFfn(const ModelConfig& c, double out_std) : cfg(c.ffn) {
  // Both gate factors are N(0, 0.02) like every other weight, so the product's pre-activation starts about
  // 0.02·√d_low times a MoE gate's and AoE's experts start quieter than the other kinds' (no rescaling is applied:
  // docs/UOE.md specifies none).
  gate_down = register_parameter("gate_down", init_normal({c.d_model, cfg.n_experts * cfg.d_low}, 0.02));
  w = make_experts(*this, cfg.n_experts, cfg.d_low, c.d_model, cfg.expert_width, out_std);
  if (cfg.shared_width > 0)
    shared = register_module("shared", std::make_shared<SwiGLU>(c.d_model, cfg.shared_width, out_std));
}

FfnOut AoeFfn::forward(const Tensor& x) {
  const int64_t T = x.size(0), n = cfg.n_experts;
  const DType dt = x.dtype();
  const Tensor c = ops::matmul(x, gate_down.to(dt));                         // [T, n * d_low]
  const Tensor scores = ops::group_l2norm(c, n, router_dtype(x.dtype()));  // [T, n], float32 (read from bf16 as it is)
  const Routed routed = route_tokens(x, scores, cfg);
  const ops::Route& route = routed.route;
  Tensor y = run_experts(x, route.indices, route.weights.to(dt), w.to(dt), 0, cfg.expert_width,
                         c.view({T, n, cfg.d_low}));
  if (shared) y = y + shared->forward(x);
  return {y, routed.aux};
}

}  // namespace uoe::nn
