// The per-evaluation routing probe: one traced forward (and for UoE the gradient-path backward) of a fixed sample.
#include "analysis/routing_probe.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>

#include "analysis/gradient_paths.h"
#include "analysis/routing_analysis.h"
#include "autograd/grad_mode.h"
#include "core/error.h"

namespace uoe::analysis {
namespace {

// sqrt(Σ v_i²): the norm over every expert of a layer from the experts' own norms.
double combined_norm(const std::vector<double>& v) {
  return std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0));
}

// The traces of every layer's forward over ids [B, T] (UoE: with the gradient paths of its backward).
std::vector<RoutingGradientSplit> traced_pass(nn::LanguageModel& model, const Tensor& ids, const Tensor& targets) {
  if (model.config.ffn.kind == nn::FfnKind::UoE) {
    std::vector<RoutingGradientSplit> splits = routing_gradient_paths(model, ids, targets);
    model.zero_grad();
    return splits;
  }
  NoGradGuard no_grad;
  model.forward(ids);
  return {};
}

json::Value layer_json(nn::Ffn& ffn, int64_t n, int64_t slots, const RoutingGradientSplit* split) {
  LayerAccumulator acc(n, slots);
  acc.add_routing(ffn.trace);
  // The experts' activations in the dtype of their weights (a run with bfloat16 compute or parameters has the
  // layer's input in the other dtype).
  nn::RoutingTrace trace = ffn.trace;
  trace.input = trace.input.to(ffn.experts()->gate.dtype());
  std::vector<int64_t> rows(size_t(trace.input.size(0)));
  std::iota(rows.begin(), rows.end(), int64_t(0));
  acc.add_activations(ffn, trace, rows);
  const LayerAnalysis a = acc.finish(1);
  json::Value l = json::Value::object();
  l["agreement"] = a.full.overlap;
  l["agreement_chance"] = a.full.random_overlap;
  l["load_entropy"] = a.load_entropy * std::log(double(n));  // nats: log n when balanced
  if (split) {
    const PathNorms p = path_norms(*split);
    l["grad_vse"] = combined_norm(p.vse);
    l["grad_score"] = combined_norm(p.score);
  }
  return l;
}

}  // namespace

RoutingProbe::RoutingProbe(const nn::TokenDataset& data, int64_t seq, int64_t tokens)
    : sample_(data.val_batch(0, std::max<int64_t>(1, tokens / seq), seq)) {}

json::Value RoutingProbe::operator()(nn::LanguageModel& model) const {
  const auto t0 = std::chrono::steady_clock::now();
  const nn::FfnConfig& f = model.config.ffn;
  UOE_CHECK(f.kind != nn::FfnKind::Dense, "[routing probe] the model has a dense FFN: no routing to measure");
  const int64_t n = f.n_experts, slots = f.routing == nn::Routing::TopP ? n : f.top_k;
  const bool was_training = model.is_training();
  std::vector<bool> was_recording;
  for (auto& b : model.blocks) {
    was_recording.push_back(b->ffn->record);
    b->ffn->record = true;
  }
  model.eval();
  const Device device = model.embed->weight.device();
  const std::vector<RoutingGradientSplit> splits = traced_pass(model, sample_.x.to(device), sample_.y.to(device));
  json::Value layers = json::Value::array();
  for (size_t l = 0; l < model.blocks.size(); ++l) {
    layers.push_back(layer_json(*model.blocks[l]->ffn, n, slots, splits.empty() ? nullptr : &splits[l]));
    model.blocks[l]->ffn->record = was_recording[l];
  }
  model.train(was_training);
  json::Value out = json::Value::object();
  out["tokens"] = sample_.x.numel();
  out["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  out["layers"] = std::move(layers);
  return out;
}

}  // namespace uoe::analysis
