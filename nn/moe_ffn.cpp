// MoE (linear router) and AoE (factorised, self-selecting gate) FFN layers.
#include "autograd/grad_mode.h"
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

ops::RouteWeights weights_mode(const std::string& s) {
  return s == "full_softmax" ? ops::RouteWeights::FullSoftmax : ops::RouteWeights::TopKSoftmax;
}


MoeFfn::MoeFfn(const ModelConfig& c, double out_std) : cfg(c.ffn) {
  router = register_parameter("router", init_normal({c.d_model, cfg.n_experts}, 0.02));
  w = make_experts(*this, cfg.n_experts, c.d_model, c.d_model, cfg.expert_width, out_std);
  if (cfg.shared_width > 0) shared = register_module("shared", std::make_shared<SwiGLU>(c.d_model, cfg.shared_width, out_std));
}

Tensor MoeFfn::forward(const Tensor& x) {
  // Router in float32 whatever the compute dtype: logits [T, n]
  const Tensor logits = ops::matmul(x.to(router_dtype(x.dtype())), router.to(router_dtype(x.dtype())));
  const ops::Route route = ops::topk_route(logits, cfg.top_k, ops::RouteWeights::TopKSoftmax);
  const DType dt = x.dtype();  // expert weights in the compute dtype
  Tensor y = run_experts(x, route.indices, route.weights.to(dt), w.to(dt), 0, cfg.expert_width);
  if (shared) y = y + shared->forward(x);
  const Tensor probs = ops::softmax(logits, -1);
  stats = routing_stats(probs, route);
  if (cfg.aux_loss > 0) stats.aux_loss = ops::load_balance_loss(probs, route.indices) * cfg.aux_loss;
  if (cfg.z_loss > 0) {
    const Tensor z = ops::router_z_loss(logits) * cfg.z_loss;
    stats.aux_loss = stats.aux_loss.defined() ? stats.aux_loss + z : z;
  }
  if (record) keep_trace(x, logits, route);
  return y;
}

AoeFfn::AoeFfn(const ModelConfig& c, double out_std) : cfg(c.ffn) {
  // Both gate factors are N(0, 0.02) like every other weight, so the product's pre-activation starts about
  // 0.02·√d_low times a MoE gate's and AoE's experts start quieter than the other kinds' (no rescaling is applied:
  // docs/UOE.md specifies none).
  gate_down = register_parameter("gate_down", init_normal({c.d_model, cfg.n_experts * cfg.d_low}, 0.02));
  w = make_experts(*this, cfg.n_experts, cfg.d_low, c.d_model, cfg.expert_width, out_std);
}

Tensor AoeFfn::forward(const Tensor& x) {
  const int64_t T = x.size(0), n = cfg.n_experts;
  const DType dt = x.dtype();
  const Tensor c = ops::matmul(x, gate_down.to(dt));                   // [T, n * d_low]
  const Tensor scores = ops::group_l2norm(c.to(router_dtype(x.dtype())), n);    // [T, n]
  const ops::Route route = ops::topk_route(scores, cfg.top_k, weights_mode(cfg.weights));
  const Tensor y = run_experts(x, route.indices, route.weights.to(dt), w.to(dt), 0, cfg.expert_width, c.view({T, n, cfg.d_low}));
  const Tensor probs = ops::softmax(scores, -1);
  stats = routing_stats(probs, route);
  if (cfg.aux_loss > 0) stats.aux_loss = ops::load_balance_loss(probs, route.indices) * cfg.aux_loss;
  if (record) keep_trace(x, scores, route);
  return y;
}

}  // namespace uoe::nn
