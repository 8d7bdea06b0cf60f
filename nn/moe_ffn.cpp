// The expert weights of the expert kinds, and the MoE FFN (linear router, optional shared expert).
#include "nn/ffn.h"
#include "ops/ops.h"

namespace uoe::nn {

ExpertWeights make_experts(Module& m, int64_t n, int64_t d_gate, int64_t d, int64_t D, double out_std) {
  ExpertWeights w;
  w.gate = m.register_parameter("w_gate", init_normal({n, d_gate, D}, 0.02));
  w.up = m.register_parameter("w_up", init_normal({n, d, D}, 0.02));
  w.down = m.register_parameter("w_down", init_normal({n, D, d}, out_std));
  return w;
}

MoeFfn::MoeFfn(const ModelConfig& c, double out_std) : cfg(c.ffn) {
  router = register_parameter("router", init_normal({c.d_model, cfg.n_experts}, 0.02));
  w = make_experts(*this, cfg.n_experts, c.d_model, c.d_model, cfg.expert_width, out_std);
  if (cfg.shared_width > 0) shared = register_module("shared", std::make_shared<SwiGLU>(c.d_model, cfg.shared_width, out_std));
}

FfnOut MoeFfn::forward(const Tensor& x) {
  // Router in float32 whatever the compute dtype: logits [T, n]
  const Tensor logits = ops::matmul(x.to(router_dtype(x.dtype())), router.to(router_dtype(x.dtype())));
  Routed routed = route_tokens(x, logits, cfg);
  const ops::Route& route = routed.route;
  const DType dt = x.dtype();  // expert weights in the compute dtype
  Tensor y = run_experts(x, route.indices, route.weights.to(dt), w.to(dt), 0, cfg.expert_width);
  if (shared) y = y + shared->forward(x);
  if (cfg.z_loss > 0) routed.aux = add_loss(routed.aux, ops::router_z_loss(logits) * cfg.z_loss);
  return {y, routed.aux};
}

}  // namespace uoe::nn
