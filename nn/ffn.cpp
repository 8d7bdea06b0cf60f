// FFN factory, routing statistics and the dense SwiGLU kind.
#include "nn/ffn.h"

#include "autograd/grad_mode.h"
#include "nn/expert_parallel.h"
#include "ops/ops.h"

namespace uoe::nn {

std::shared_ptr<Ffn> make_ffn(const ModelConfig& c, double out_std) {
  switch (c.ffn.kind) {
    case FfnKind::Dense: return std::make_shared<DenseFfn>(c.d_model, c.ffn.hidden, out_std);
    case FfnKind::MoE: return std::make_shared<MoeFfn>(c, out_std);
    case FfnKind::AoE: return std::make_shared<AoeFfn>(c, out_std);
    case FfnKind::UoE: return std::make_shared<UoeFfn>(c, out_std);
  }
  return nullptr;
}

RoutingSummary FfnStats::routing() const {
  UOE_CHECK(routed(), "[FfnStats::routing] a dense FFN routes nothing");
  NoGradGuard no_grad;
  const int64_t n = probs.size(1);
  RoutingSummary s;
  s.load.assign(size_t(n), 0.0);
  double total = 0;
  for (int64_t e : indices.to_vector<int64_t>())
    if (e >= 0) {
      s.load[size_t(e)] += 1;
      total += 1;
    }
  for (double& f : s.load) f = total > 0 ? f / total : 0.0;
  const std::vector<double> mean_p = ops::mean(probs.to(DType::Float64), {0}).to_vector<double>();  // P_i
  for (int64_t i = 0; i < n; ++i) s.balance += double(n) * s.load[size_t(i)] * mean_p[size_t(i)];
  return s;
}

Tensor add_loss(const Tensor& total, const Tensor& term) { return total.defined() ? total + term : term; }

Ffn::Routed Ffn::route_tokens(const Tensor& x, const Tensor& scores, const FfnConfig& cfg) {
  Routed out;
  out.route = cfg.routing == Routing::TopP ? ops::topp_route(scores, cfg.top_p, cfg.n_experts, cfg.weights)
                                           : ops::topk_route(scores, cfg.top_k, cfg.weights);
  const Tensor probs = ops::softmax(scores, -1);  // P [T, n]
  stats = {probs.detach(), out.route.indices};
  if (cfg.aux_loss > 0) out.aux = ops::load_balance_loss(probs, out.route.indices) * cfg.aux_loss;
  if (cfg.routing == Routing::TopP) {
    const Tensor entropy = -ops::mean(ops::sum(probs * ops::log_softmax(scores, -1), {-1}));
    out.aux = add_loss(out.aux, entropy * 1e-4);
  }
  if (record) trace = {x.detach(), scores.detach(), {out.route.indices, out.route.weights.detach()}};
  return out;
}

void Ffn::shard_experts(Communicator& group) {
  ExpertWeights* w = experts();
  UOE_CHECK(w, "[shard_experts] a dense FFN has no experts to split");
  UOE_CHECK(!expert_group_, "[shard_experts] the experts are sharded already");
  const int64_t n = w->gate.size(0), P = group.size();
  UOE_CHECK(n % P == 0, "[shard_experts] ", n, " experts do not split evenly across ", P, " ranks");
  const int64_t n_local = n / P, first = group.rank() * n_local;
  // a copy of the rows: a view would keep the whole tensor's storage alive
  for (const Tensor* t : {&w->gate, &w->up, &w->down}) replace_parameter(*t, t->narrow(0, first, n_local).clone());
  expert_group_ = &group;
}

ExpertWeights Ffn::routing_parts(const ExpertWeights& w, int64_t r) const {
  ExpertWeights parts{w.gate.narrow(2, 0, r), w.up.narrow(2, 0, r), w.down.narrow(1, 0, r)};
  if (!expert_group_) return parts;
  // One exchange for the three, each expert's parts side by side: [n_local, Σ sizes] -> [n, Σ sizes], cut apart.
  const int64_t m = parts.gate.size(0);
  std::vector<Tensor> flat;
  for (const Tensor* t : {&parts.gate, &parts.up, &parts.down}) flat.push_back(t->reshape({m, t->numel() / m}));
  const Tensor all = all_gather_rows(ops::cat(flat, 1), *expert_group_);
  ExpertWeights gathered;
  int64_t begin = 0;
  for (auto [part, out] : {std::pair{&parts.gate, &gathered.gate}, {&parts.up, &gathered.up}, {&parts.down, &gathered.down}}) {
    Shape shape = part->shape();
    shape[0] = all.size(0);
    *out = all.narrow(1, begin, part->numel() / m).reshape(shape);
    begin += part->numel() / m;
  }
  return gathered;
}

Tensor Ffn::run_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& w,
                        int64_t r0, int64_t r1, const Tensor& gate_input) const {
  if (expert_group_)
    return expert_parallel_ffn(*expert_group_, x, indices, weights, w.gate, w.up, w.down, r0, r1, gate_input);
  return ops::expert_ffn(x, indices, weights, w.gate, w.up, w.down, r0, r1, gate_input);
}

DenseFfn::DenseFfn(int64_t d, int64_t hidden, double out_std) {
  mlp = register_module("mlp", std::make_shared<SwiGLU>(d, hidden, out_std));
}

FfnOut DenseFfn::forward(const Tensor& x) {
  stats = {};
  return {mlp->forward(x), Tensor()};
}

}  // namespace uoe::nn
