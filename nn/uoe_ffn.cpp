// Union-of-Experts FFN (docs/UOE.md): routing neurons as routers, virtual shared expert, every switch.
#include "nn/ffn.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

// 1 where token t did not select expert i, else 0, repeated over the r routing neurons: [T, n·r]
Tensor unselected_mask(const Tensor& indices, int64_t n, int64_t r, DType dtype) {
  const int64_t T = indices.size(0), K = indices.size(1);
  const std::vector<int64_t> idx = indices.to_vector<int64_t>();
  std::vector<double> mask(static_cast<size_t>(T * n), 1.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k)
      if (idx[size_t(t * K + k)] >= 0) mask[size_t(t * n + idx[size_t(t * K + k)])] = 0.0;
  // on the device of the indices (and of the activations it multiplies)
  return from_vector(mask, {T, n}, TensorOptions{}.with_dtype(dtype).with_device(indices.device()))
      .unsqueeze(2)
      .expand({T, n, r})
      .reshape({T, n * r});
}

}  // namespace

RoutingActivations routing_activations(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, int64_t r,
                                       ScoreSource score) {
  const int64_t d = x.size(1), n = w_gate.size(0);
  // Stack the routing parts [0, r) of all experts, in the compute dtype: Ŵ_g^R, Ŵ_p^R [d, n·r]
  const Tensor wg_r = w_gate.narrow(2, 0, r).permute({1, 0, 2}).reshape({d, n * r}).to(x.dtype());
  const Tensor wp_r = w_up.narrow(2, 0, r).permute({1, 0, 2}).reshape({d, n * r}).to(x.dtype());
  RoutingActivations act;
  act.g = ops::matmul(x, wg_r);
  act.h = ops::swiglu(act.g, ops::matmul(x, wp_r));
  switch (score) {
    case ScoreSource::SwiGLU: act.source = act.h; break;
    case ScoreSource::GateSilu: act.source = ops::silu(act.g); break;
    case ScoreSource::Gate: act.source = act.g; break;
  }
  return act;
}

UoeFfn::UoeFfn(const ModelConfig& c, double out_std) : cfg(c.ffn) {
  w = make_experts(*this, cfg.n_experts, c.d_model, c.d_model, cfg.expert_width, out_std);
}

FfnOut UoeFfn::forward(const Tensor& x) {
  const int64_t d = x.size(1), n = cfg.n_experts, r = cfg.routing_neurons, D = cfg.expert_width;
  // The expert weights in the compute dtype, cast once (no-ops when they already are): this rank's experts (all of
  // them without expert parallelism), and every expert's routing part [n, d, r], [n, d, r], [n, r, d]
  const DType dt = x.dtype();
  const ExpertWeights experts = w.to(dt), routing = routing_parts(experts, r);
  // Dense part, every token, every expert: H = silu(x Ŵ_g^R) ⊙ (x Ŵ_p^R)   [T, n·r]
  const RoutingActivations act = routing_activations(x, routing.gate, routing.up, r, cfg.score);
  Tensor h = act.h, source = act.source;
  // Separate aliases so each path's gradient is seen on its own; none without a graph (no-grad, or the first forward
  // of activation checkpointing, whose recomputation registers them)
  if (vse_grad_hook && h.requires_grad()) {
    h = h.view(h.shape());
    h.register_hook(vse_grad_hook);
  }
  if (score_grad_hook && source.requires_grad()) {
    source = source.view(source.shape());
    source.register_hook(score_grad_hook);
  }
  const Tensor wo_r = routing.down.reshape({n * r, d});  // Ŵ_o^R [n·r, d]
  // Routing score: L2 norm of each expert's r activations, in float32 (read from bfloat16 as it is)   [T, n]
  const Tensor s = ops::group_l2norm(source, n, router_dtype(x.dtype()));
  const Routed routed = route_tokens(x, s, cfg);
  const ops::Route& route = routed.route;
  const Tensor weights = route.weights.to(dt);
  Tensor y;
  if (cfg.combine == Combine::Vse) {
    // y = VSE + Σ_{i∈I} w_i · E_i restricted to neurons [r, D)
    y = ops::matmul(h, wo_r) + run_experts(x, route.indices, weights, experts, r, D);
  } else {
    // full_expert: selected experts contribute w_i · E_i(x) over all D neurons; only the
    // unselected experts' routing parts enter with weight 1.
    const Tensor unselected = unselected_mask(route.indices, n, r, x.dtype());  // [T, n·r]
    y = ops::matmul(h * unselected, wo_r) + run_experts(x, route.indices, weights, experts, 0, D);
  }
  return {y, routed.aux};
}

}  // namespace uoe::nn
