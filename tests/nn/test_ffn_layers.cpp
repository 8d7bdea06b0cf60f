// MoE, AoE and UoE layers equal the same math written with primitive ops, in the output and in
// every parameter's gradient, for every switch value (float64).
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "gradcheck.h"
#include "nn/ffn.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

using testing::random_double;
const TensorOptions kF64 = TensorOptions{}.with_dtype(DType::Float64);

ModelConfig small_config(FfnKind kind) {
  ModelConfig c;
  c.d_model = 12;
  c.ffn.kind = kind;
  c.ffn.n_experts = 4;
  c.ffn.top_k = 2;
  c.ffn.expert_width = 10;
  c.ffn.routing_neurons = 3;
  c.ffn.d_low = 4;
  c.ffn.shared_width = 6;
  return c;
}

// Per-token weight of every expert: [T, n], w[t, i] = Σ_k [idx[t,k] == i] weights[t,k] (differentiable in weights).
Tensor dense_weights(const Tensor& idx, const Tensor& weights, int64_t n) {
  const Tensor valid = ops::ge(idx, ops::scalar_like(0, idx));
  const Tensor safe = ops::where(valid, idx, ops::scalar_like(0, idx));
  const Tensor w = ops::where(valid, weights, ops::scalar_like(0, weights));
  return ops::scatter_add(zeros({idx.size(0), n}, kF64), 1, safe, w);
}

// Route from scores with primitive ops: top-k (or top-p) selection, weights by mode.
std::pair<Tensor, Tensor> reference_route(const Tensor& s, const FfnConfig& f) {
  const int64_t T = s.size(0), n = s.size(1);
  const Tensor probs = ops::softmax(s, -1);
  if (f.routing == Routing::TopP) {
    // descending probabilities until the cumulative sum exceeds p
    const auto pv = probs.to_vector<double>();
    std::vector<int64_t> idx(size_t(T * n), -1);
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) order[size_t(i)] = i;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return pv[size_t(t * n + a)] > pv[size_t(t * n + b)]; });
      double cum = 0;
      for (int64_t k = 0; k < n; ++k) {
        idx[size_t(t * n + k)] = order[size_t(k)];
        cum += pv[size_t(t * n + order[size_t(k)])];
        if (cum > f.top_p) break;
      }
    }
    const Tensor I = from_vector(idx, {T, n});
    const Tensor safe = ops::where(ops::ge(I, ops::scalar_like(0, I)), I, ops::scalar_like(0, I));
    Tensor w = ops::where(ops::ge(I, ops::scalar_like(0, I)), ops::gather(probs, 1, safe), ops::scalar_like(0, probs));
    if (f.weights == ops::RouteWeights::TopKSoftmax) w = w / ops::sum(w, {1}, true);
    return {I, w};
  }
  auto [vals, I] = ops::topk(s, f.top_k, 1);
  const Tensor w = f.weights == ops::RouteWeights::TopKSoftmax ? ops::softmax(vals, -1) : ops::gather(probs, 1, I);
  return {I, w};
}

// One SwiGLU expert i restricted to neurons [r0, r1): (silu(g W_g[i]) ⊙ (x W_p[i])) W_o[i]
Tensor expert(const ExpertWeights& w, int64_t i, const Tensor& gate_in, const Tensor& x, int64_t r0, int64_t r1) {
  const Tensor g = ops::matmul(gate_in, w.gate.select(0, i).narrow(1, r0, r1 - r0));
  const Tensor p = ops::matmul(x, w.up.select(0, i).narrow(1, r0, r1 - r0));
  return ops::matmul(ops::silu(g) * p, w.down.select(0, i).narrow(0, r0, r1 - r0));
}

Tensor reference(Ffn& layer, const ModelConfig& c, const Tensor& x) {
  const FfnConfig& f = c.ffn;
  const int64_t n = f.n_experts, D = f.expert_width, r = f.routing_neurons;
  if (auto* moe = dynamic_cast<MoeFfn*>(&layer)) {
    const Tensor logits = ops::matmul(x, moe->router);
    auto [I, w] = reference_route(logits, f);
    const Tensor wt = dense_weights(I, w, n);
    Tensor y = moe->shared ? moe->shared->forward(x) : zeros({x.size(0), c.d_model}, kF64);
    for (int64_t i = 0; i < n; ++i) y = y + expert(moe->w, i, x, x, 0, D) * wt.narrow(1, i, 1);
    return y;
  }
  if (auto* aoe = dynamic_cast<AoeFfn*>(&layer)) {
    const Tensor C = ops::matmul(x, aoe->gate_down);  // [T, n·d_low]
    std::vector<Tensor> norms;
    for (int64_t i = 0; i < n; ++i) norms.push_back(ops::sqrt(ops::sum(ops::pow(C.narrow(1, i * f.d_low, f.d_low), 2.0), {1})));
    const Tensor s = ops::stack(norms, 1);
    auto [I, w] = reference_route(s, f);
    const Tensor wt = dense_weights(I, w, n);
    Tensor y = aoe->shared ? aoe->shared->forward(x) : zeros({x.size(0), c.d_model}, kF64);
    for (int64_t i = 0; i < n; ++i)
      y = y + expert(aoe->w, i, C.narrow(1, i * f.d_low, f.d_low), x, 0, D) * wt.narrow(1, i, 1);
    return y;
  }
  auto* u = dynamic_cast<UoeFfn*>(&layer);
  std::vector<Tensor> norms;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor g = ops::matmul(x, u->w.gate.select(0, i).narrow(1, 0, r));
    const Tensor a = ops::silu(g), h = a * ops::matmul(x, u->w.up.select(0, i).narrow(1, 0, r));
    const Tensor& src = f.score == ScoreSource::SwiGLU ? h : f.score == ScoreSource::GateSilu ? a : g;
    norms.push_back(ops::sqrt(ops::sum(src * src, {1})));
  }
  const Tensor s = ops::stack(norms, 1);
  auto [I, w] = reference_route(s, f);
  const Tensor wt = dense_weights(I, w, n);
  const Tensor sel = dense_weights(I, ones(I.shape(), kF64), n);  // 1 where selected
  Tensor y = zeros({x.size(0), c.d_model}, kF64);
  for (int64_t i = 0; i < n; ++i) {
    const Tensor vse = expert(u->w, i, x, x, 0, r), rest = expert(u->w, i, x, x, r, D);
    const Tensor wi = wt.narrow(1, i, 1), si = sel.narrow(1, i, 1);
    y = y + (f.combine == Combine::Vse ? vse + rest * wi : (vse + rest) * wi + vse * (1.0 - si));
  }
  return y;
}

void expect_layer_matches_reference(const ModelConfig& c) {
  manual_seed(11);
  auto layer = make_ffn(c, 0.05);
  layer->to(DType::Float64);
  const Tensor x1 = random_double({9, c.d_model}, 5).requires_grad_(), x2 = x1.detach().clone().requires_grad_();
  const Tensor y = layer->forward(x1).y;
  const Tensor w = random_double(y.shape(), 6);
  ops::sum(y * w).backward();
  std::map<std::string, Tensor> fused;
  for (auto& [name, p] : layer->named_parameters()) {
    fused[name] = p.grad();
    p.set_grad(Tensor());
  }
  const Tensor yr = reference(*layer, c, x2);
  ops::sum(yr * w).backward();
  const FfnConfig& f = c.ffn;
  const std::string what = std::string(ffn_kind_name(f.kind)) + " score=" + switch_name(f.score) + " weights=" +
                           switch_name(f.weights) + " combine=" + switch_name(f.combine) + " routing=" +
                           switch_name(f.routing);
  EXPECT_LT(testing::max_abs_diff(y, yr), 1e-10) << what << ": output";
  EXPECT_LT(testing::max_abs_diff(x1.grad(), x2.grad()), 1e-10) << what << ": grad of x";
  for (auto& [name, p] : layer->named_parameters()) {
    ASSERT_TRUE(fused[name].defined()) << what << ": no gradient for " << name;
    EXPECT_LT(testing::max_abs_diff(fused[name], p.grad()), 1e-10) << what << ": grad of " << name;
  }
}

TEST(FfnLayers, MoeEqualsPrimitiveOpsForEveryRoutingWithAndWithoutSharedExpert) {
  for (Routing routing : {Routing::TopK, Routing::TopP})
    for (int64_t shared : {0, 6}) {
      ModelConfig c = small_config(FfnKind::MoE);
      c.ffn.routing = routing;
      c.ffn.top_p = 0.6;
      c.ffn.shared_width = shared;
      expect_layer_matches_reference(c);
    }
}

TEST(FfnLayers, AoeEqualsPrimitiveOpsForEveryWeightModeRoutingAndSharedExpert) {
  for (ops::RouteWeights weights : {ops::RouteWeights::TopKSoftmax, ops::RouteWeights::FullSoftmax})
    for (Routing routing : {Routing::TopK, Routing::TopP})
      for (int64_t shared : {0, 6}) {
        ModelConfig c = small_config(FfnKind::AoE);
        c.ffn.weights = weights;
        c.ffn.routing = routing;
        c.ffn.top_p = 0.6;
        c.ffn.shared_width = shared;
        expect_layer_matches_reference(c);
      }
}

// Finite differences through the new paths: MoE and AoE with top-p routing (a variable number of experts per
// token, empty slots), AoE with a shared expert, and the auxiliary losses (balance, top-p entropy) they add.
TEST(FfnLayers, TopPAndAoeSharedExpertPassGradientChecks) {
  for (FfnKind kind : {FfnKind::MoE, FfnKind::AoE}) {
    ModelConfig c = small_config(kind);
    c.ffn.routing = Routing::TopP;
    c.ffn.top_p = 0.6;
    c.ffn.aux_loss = 0.01;
    manual_seed(13);
    auto layer = make_ffn(c, 0.05);
    layer->to(DType::Float64);
    testing::GradCase gc{std::string(ffn_kind_name(kind)) + " top-p", {{7, c.d_model}},
                         [&](const std::vector<Tensor>& in) {
                           const FfnOut out = layer->forward(in[0]);
                           return out.y + out.aux;  // [T, d]: the loss terms' gradients reach x too
                         }};
    EXPECT_EQ(testing::check_gradients(gc, testing::Layout::Contiguous, 3), "") << gc.name;
  }
}

TEST(FfnLayers, UoeEqualsPrimitiveOpsForEverySwitch) {
  for (ScoreSource score : {ScoreSource::SwiGLU, ScoreSource::GateSilu, ScoreSource::Gate})
    for (ops::RouteWeights weights : {ops::RouteWeights::TopKSoftmax, ops::RouteWeights::FullSoftmax})
      for (Combine combine : {Combine::Vse, Combine::FullExpert})
        for (Routing routing : {Routing::TopK, Routing::TopP}) {
          ModelConfig c = small_config(FfnKind::UoE);
          c.ffn.score = score;
          c.ffn.weights = weights;
          c.ffn.combine = combine;
          c.ffn.routing = routing;
          c.ffn.top_p = 0.6;
          expect_layer_matches_reference(c);
        }
}

TEST(FfnLayers, RoutingStatsReportLoadAndBalance) {
  ModelConfig c = small_config(FfnKind::UoE);
  manual_seed(3);
  auto layer = make_ffn(c, 0.02);
  layer->forward(randn({64, c.d_model}));
  ASSERT_TRUE(layer->stats.routed());
  // The statistics are read from what the forward kept: recount them here.
  const int64_t n = c.ffn.n_experts;
  const std::vector<int64_t> idx = layer->stats.indices.to_vector<int64_t>();
  const std::vector<double> probs = layer->stats.probs.to(DType::Float64).to_vector<double>();
  const int64_t T = layer->stats.probs.size(0);
  std::vector<double> count(size_t(n), 0.0), mean_p(size_t(n), 0.0);
  double routed = 0;
  for (int64_t e : idx)
    if (e >= 0) count[size_t(e)] += 1, routed += 1;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t e = 0; e < n; ++e) mean_p[size_t(e)] += probs[size_t(t * n + e)] / double(T);
  const RoutingSummary summary = layer->stats.routing();
  const std::vector<double>& load = summary.load;
  ASSERT_EQ(int64_t(load.size()), n);
  double total = 0, balance = 0;
  for (int64_t e = 0; e < n; ++e) {
    EXPECT_DOUBLE_EQ(load[size_t(e)], count[size_t(e)] / routed) << "expert " << e;
    total += load[size_t(e)];
    balance += double(n) * load[size_t(e)] * mean_p[size_t(e)];
  }
  EXPECT_NEAR(total, 1.0, 1e-12);
  EXPECT_NEAR(summary.balance, balance, 1e-9);
  // the balance is the load-balance loss's value
  EXPECT_NEAR(summary.balance, ops::load_balance_loss(layer->stats.probs, layer->stats.indices).item<double>(), 1e-6);
  EXPECT_FALSE(layer->stats.probs.requires_grad()) << "the kept probabilities must not hold the graph";
}

TEST(FfnLayers, DenseFfnHasNoRoutingStats) {
  ModelConfig c = small_config(FfnKind::Dense);
  auto layer = make_ffn(c, 0.02);
  layer->forward(randn({8, c.d_model}));
  EXPECT_FALSE(layer->stats.routed());
  EXPECT_THROW(layer->stats.routing(), Error);
}

}  // namespace
}  // namespace uoe::nn
