// Gradient-path probe for UoE routing neurons: record dL/dH on each consumer, pull each back alone.
#include "analysis/gradient_paths.h"

#include <cmath>
#include <tuple>

#include "core/error.h"
#include "ops/ops.h"

namespace uoe::analysis {
namespace {

// The routing-neuron block [n, d, r] of a full [n, d, D] expert matrix.
Tensor routing_block(const Tensor& w, int64_t r) { return w.narrow(2, 0, r).contiguous(); }

// The gradient a leaf received, [n, d, r] (zeros when none reached it, e.g. W_up for score = gate).
Tensor routing_grad(const Tensor& w, int64_t r) {
  return w.grad().defined() ? routing_block(w.grad(), r) : zeros_like(routing_block(w.detach(), r));
}

// Pulls a gradient arriving at one of the routing activations back to W_gate^R and W_up^R.
// `pick` chooses the tensor (h or the score source) of a fresh recomputation on copies of the routing blocks
// [n, d, r] alone (routing_activations reads only neurons [0, r)).
template <typename Pick>
std::pair<Tensor, Tensor> pull_back(const nn::UoeFfn& layer, const Tensor& grad, Pick pick) {
  const int64_t r = layer.cfg.routing_neurons;
  Tensor w_gate = routing_block(layer.w.gate.detach(), r).requires_grad_();
  Tensor w_up = routing_block(layer.w.up.detach(), r).requires_grad_();
  if (grad.defined()) pick(nn::routing_activations(layer.trace.input, w_gate, w_up, r, layer.cfg.score)).backward(grad);
  return {routing_grad(w_gate, r), routing_grad(w_up, r)};
}

}  // namespace

GradientPathProbe::GradientPathProbe(nn::UoeFfn& layer)
    : layer_(layer), recorded_(std::make_shared<Recorded>()), was_recording_(layer.record) {
  std::weak_ptr<Recorded> weak = recorded_;
  layer_.vse_grad_hook = [weak](const Tensor& g) {
    if (auto r = weak.lock()) r->d_h = g.detach().clone();
    return Tensor();
  };
  layer_.score_grad_hook = [weak](const Tensor& g) {
    if (auto r = weak.lock()) r->d_source = g.detach().clone();
    return Tensor();
  };
  layer_.record = true;
}

GradientPathProbe::~GradientPathProbe() {
  layer_.vse_grad_hook = nullptr;
  layer_.score_grad_hook = nullptr;
  layer_.record = was_recording_;
}

RoutingGradientSplit GradientPathProbe::split() const {
  UOE_CHECK(layer_.trace.input.defined(), "[gradient paths] the probed UoE layer has not run forward yet");
  UOE_CHECK(layer_.w.gate.grad().defined(),
            "[gradient paths] the probed UoE layer's weights have no gradient: run backward first");
  const int64_t r = layer_.cfg.routing_neurons;
  RoutingGradientSplit s;
  std::tie(s.vse_gate, s.vse_up) = pull_back(layer_, recorded_->d_h, [](const nn::RoutingActivations& a) { return a.h; });
  std::tie(s.score_gate, s.score_up) =
      pull_back(layer_, recorded_->d_source, [](const nn::RoutingActivations& a) { return a.source; });
  s.full_gate = routing_grad(layer_.w.gate, r);
  s.full_up = routing_grad(layer_.w.up, r);
  return s;
}

PathNorms path_norms(const RoutingGradientSplit& s, bool per_neuron) {
  const int64_t n = s.full_gate.size(0), d = s.full_gate.size(1), r = s.full_gate.size(2);
  const int64_t groups = per_neuron ? n * r : n;
  // Both matrices of expert e (or of its neuron j: their column j) as one vector: [groups, ·] in float64
  auto grouped = [&](const Tensor& gate, const Tensor& up) {
    const Tensor g = gate.defined() ? gate : zeros_like(s.full_gate), u = up.defined() ? up : zeros_like(s.full_up);
    const auto rows = [&](const Tensor& t) {
      return per_neuron ? t.permute({0, 2, 1}).reshape({n * r, d}) : t.reshape({n, d * r});
    };
    return ops::cat({rows(g), rows(u)}, 1).to(DType::Float64);
  };
  const Tensor vse = grouped(s.vse_gate, s.vse_up), score = grouped(s.score_gate, s.score_up);
  const Tensor aux = grouped(s.aux_gate, s.aux_up), full = grouped(s.full_gate, s.full_up);
  auto norms = [](const Tensor& t) { return ops::sqrt(ops::sum(t * t, {1})).to_vector<double>(); };
  PathNorms p;
  p.vse = norms(vse);
  p.score = norms(score);
  p.weights = norms(score - aux);
  p.aux = norms(aux);
  p.full = norms(full);
  p.rest = norms(full - vse - score);
  const std::vector<double> dot = ops::sum(vse * score, {1}).to_vector<double>();
  for (int64_t i = 0; i < groups; ++i) {
    const double denom = p.vse[size_t(i)] * p.score[size_t(i)];
    p.cosine.push_back(denom > 0 ? dot[size_t(i)] / denom : 0.0);
  }
  return p;
}

std::vector<RoutingGradientSplit> routing_gradient_paths(nn::LanguageModel& model, const Tensor& ids,
                                                         const Tensor& targets) {
  std::vector<nn::UoeFfn*> layers;
  std::vector<std::unique_ptr<GradientPathProbe>> probes;
  for (auto& block : model.blocks)
    if (auto* uoe = dynamic_cast<nn::UoeFfn*>(block->ffn.get())) {
      layers.push_back(uoe);
      probes.push_back(std::make_unique<GradientPathProbe>(*uoe));
    }
  UOE_CHECK(!probes.empty(), "[gradient paths] the model has no UoE layer (ffn kind '",
            nn::ffn_kind_name(model.config.ffn.kind), "')");
  model.zero_grad();
  model.loss(ids, targets).backward();
  std::vector<RoutingGradientSplit> out;
  for (const auto& p : probes) out.push_back(p->split());
  model.zero_grad();
  for (size_t i = 0; i < layers.size(); ++i) std::tie(out[i].aux_gate, out[i].aux_up) = own_aux_gradient(*layers[i]);
  return out;
}

std::pair<Tensor, Tensor> own_aux_gradient(nn::UoeFfn& layer) {
  UOE_CHECK(layer.trace.input.defined(), "[gradient paths] the UoE layer has no traced forward (set record first)");
  const int64_t r = layer.cfg.routing_neurons;
  layer.zero_grad();
  const nn::FfnOut out = layer.forward(layer.trace.input);
  std::pair<Tensor, Tensor> g;
  if (out.aux.defined()) {
    out.aux.backward();
    g = {routing_grad(layer.w.gate, r), routing_grad(layer.w.up, r)};
  }
  layer.zero_grad();
  return g;
}

}  // namespace uoe::analysis
