// Routing analysis on hand-built layers whose routing is known in closed form (token class c goes to
// expert c), and the gradient-path split of UoE's routing neurons (parts add up to the full gradient,
// each part equals the gradient with the other path cut).
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/gradient_paths.h"
#include "analysis/routing_analysis.h"
#include "autograd/grad_mode.h"
#include "fixtures.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe::analysis {
namespace {

using testing::max_abs_diff;
using testing::random_double;
const TensorOptions kF64 = TensorOptions{}.with_dtype(DType::Float64);

// d = n = D = 4, r = 2: expert i's gate and up columns read input coordinate i only (weight 1).
nn::ModelConfig diagonal_config(nn::FfnKind kind, int64_t top_k) {
  nn::ModelConfig c;
  c.d_model = 4;
  c.ffn.kind = kind;
  c.ffn.n_experts = 4;
  c.ffn.top_k = top_k;
  c.ffn.expert_width = 4;
  c.ffn.routing_neurons = 2;
  return c;
}

void set_diagonal(nn::ExpertWeights w) {  // handles share the parameters
  NoGradGuard no_grad;
  const int64_t n = w.gate.size(0), d = w.gate.size(1), D = w.gate.size(2);
  std::vector<double> v(size_t(n * d * D), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < D; ++k) v[size_t((i * d + i) * D + k)] = 1.0;
  w.gate.copy_(from_vector(v, {n, d, D}, kF64));
  w.up.copy_(from_vector(v, {n, d, D}, kF64));
}

// Tokens 3·e_c for the classes c: [T, 4]
Tensor class_tokens(const std::vector<int64_t>& classes) {
  std::vector<double> x(classes.size() * 4, 0.0);
  for (size_t t = 0; t < classes.size(); ++t) x[t * 4 + size_t(classes[t])] = 3.0;
  return from_vector(x, {int64_t(classes.size()), 4}, kF64);
}

const std::vector<int64_t> kClasses = {0, 0, 1, 2, 0, 1, 0, 2, 2, 0};  // expert 3 never chosen first
const double kSilu3 = 3.0 / (1.0 + std::exp(-3.0));

double entropy(const std::vector<double>& p) {
  double h = 0;
  for (double x : p)
    if (x > 0) h -= x * std::log(x);
  return h;
}

LayerAnalysis run(nn::Ffn& ffn, int64_t n, int64_t K) {
  ffn.record = true;
  ffn.forward(class_tokens(kClasses));
  LayerAccumulator acc(n, K);
  acc.add_routing(ffn.trace);
  std::vector<int64_t> rows(kClasses.size());
  for (size_t t = 0; t < rows.size(); ++t) rows[t] = int64_t(t);
  acc.add_activations(ffn, ffn.trace, rows);
  return acc.finish(10);
}

TEST(RoutingAnalysis, KnownTopOneRoutingGivesExactNumbers) {
  nn::UoeFfn layer(diagonal_config(nn::FfnKind::UoE, 1), 0.02);
  layer.to(DType::Float64);
  set_diagonal(layer.w);
  const LayerAnalysis a = run(layer, 4, 1);
  // load = class frequencies; entropy of (5, 2, 3, 0) / 10 over log 4
  const std::vector<double> load = {0.5, 0.2, 0.3, 0.0};
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(a.load[i], load[i]);
  EXPECT_NEAR(a.load_entropy, entropy(load) / std::log(4.0), 1e-12);
  EXPECT_EQ(a.confidence_entropy, 0.0);  // K = 1
  EXPECT_EQ(a.experts_per_token, 1.0);
  // score of the chosen expert: ‖(silu(3)·3, silu(3)·3)‖ over r = 2 neurons, the others 0
  const double s = std::sqrt(2.0) * 3.0 * kSilu3;
  EXPECT_NEAR(a.margin_mean, s, 1e-12);
  EXPECT_NEAR(a.margin_median, s, 1e-12);
  double margins = 0;
  for (double c : a.margin.counts) margins += c;
  EXPECT_EQ(margins, double(kClasses.size()));
  double scored = 0;
  for (const Histogram& h : a.scores)
    for (double c : h.counts) scored += c;
  EXPECT_EQ(scored, double(4 * kClasses.size()));
  // the score ranks experts exactly as the full activation (and as neurons r..D) do
  EXPECT_DOUBLE_EQ(a.full.spearman, 1.0);
  EXPECT_DOUBLE_EQ(a.full.overlap, 1.0);
  EXPECT_DOUBLE_EQ(a.full.random_overlap, 0.25);
  ASSERT_TRUE(a.has_rest);
  EXPECT_DOUBLE_EQ(a.rest.overlap, 1.0);
  for (size_t i = 0; i < 3; ++i) EXPECT_NEAR(a.full.spearman_expert[i], 1.0, 1e-12);
  EXPECT_EQ(a.full.spearman_expert[3], 0.0);  // expert 3's score and norm are constant: no correlation defined
}

TEST(RoutingAnalysis, KnownTopTwoRoutingWeightsAndLoad) {
  nn::UoeFfn layer(diagonal_config(nn::FfnKind::UoE, 2), 0.02);
  layer.to(DType::Float64);
  set_diagonal(layer.w);
  const LayerAnalysis a = run(layer, 4, 2);
  // second choice: the lowest-index expert among the zero scores
  std::vector<double> count(4, 0.0);
  for (int64_t c : kClasses) {
    count[size_t(c)] += 1;
    count[c == 0 ? 1 : 0] += 1;
  }
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(a.load[i], count[i] / 20.0);
  // weights softmax(s, 0) for every token
  const double s = std::sqrt(2.0) * 3.0 * kSilu3, w1 = 1.0 / (1.0 + std::exp(-s));
  EXPECT_NEAR(a.confidence_entropy, entropy({w1, 1 - w1}) / std::log(2.0), 1e-12);
  EXPECT_NEAR(a.margin_mean, 0.0, 1e-12);  // 2nd and 3rd scores are both 0
  EXPECT_DOUBLE_EQ(a.full.overlap, 1.0);    // top-2 by activation: the same tie-broken pair
  EXPECT_DOUBLE_EQ(a.full.random_overlap, 0.5);
}

TEST(RoutingAnalysis, MoeRouterAgreementIsMeasuredAgainstItsExperts) {
  nn::MoeFfn layer(diagonal_config(nn::FfnKind::MoE, 1), 0.02);
  layer.to(DType::Float64);
  set_diagonal(layer.w);
  {
    NoGradGuard no_grad;
    // a router that sends class c to expert (c + 1) mod 4: never the expert whose activation is largest
    std::vector<double> r(16, 0.0);
    for (int64_t c = 0; c < 4; ++c) r[size_t(c * 4 + (c + 1) % 4)] = 5.0;
    layer.router.copy_(from_vector(r, {4, 4}, kF64));
  }
  const LayerAnalysis a = run(layer, 4, 1);
  EXPECT_DOUBLE_EQ(a.load[1], 0.5);
  EXPECT_DOUBLE_EQ(a.full.overlap, 0.0);
  EXPECT_FALSE(a.has_rest);
  EXPECT_NEAR(a.margin_mean, 15.0, 1e-12);  // logits 15 vs 0
}

TEST(RoutingAnalysis, ActivationNormsMatchTheComposedExperts) {
  nn::ModelConfig c = diagonal_config(nn::FfnKind::AoE, 2);
  c.d_model = 6;
  c.ffn.expert_width = 5;
  c.ffn.d_low = 3;
  nn::AoeFfn aoe(c, 0.02);
  aoe.to(DType::Float64);
  const Tensor x = random_double({7, 6}, 11);
  const Tensor got = expert_activation_norms(aoe, x, 1, 4);  // [7, 4]
  for (int64_t i = 0; i < 4; ++i) {
    // W_gate[i] = W_down[i] W_up_gate[i]: [d, D]
    const Tensor w_gate = ops::matmul(aoe.gate_down.narrow(1, i * 3, 3), aoe.w.gate.select(0, i)).narrow(1, 1, 3);
    const Tensor h = ops::silu(ops::matmul(x, w_gate)) * ops::matmul(x, aoe.w.up.select(0, i).narrow(1, 1, 3));
    EXPECT_LT(max_abs_diff(got.select(1, i), ops::sqrt(ops::sum(h * h, {1}))), 1e-12) << "expert " << i;
  }
  // UoE: the routing score is exactly the norm over the routing neurons [0, r)
  nn::ModelConfig u = c;
  u.ffn.kind = nn::FfnKind::UoE;
  nn::UoeFfn uoe(u, 0.02);
  uoe.to(DType::Float64);
  uoe.record = true;
  uoe.forward(x);
  EXPECT_LT(max_abs_diff(expert_activation_norms(uoe, x, 0, 2), uoe.trace.scores), 1e-12);
  testing::expect_error([&] { expert_activation_norms(uoe, x, 3, 9); }, {"expert_activation_norms", "[3, 9)"});
}

// Gradient of the routing-neuron weights with one path cut by a zeroing hook: [n, d, r] each
std::pair<Tensor, Tensor> cut_path(nn::UoeFfn& layer, const Tensor& x, const Tensor& target, bool cut_score) {
  GradHook zero = [](const Tensor& g) { return zeros_like(g); };
  (cut_score ? layer.score_grad_hook : layer.vse_grad_hook) = zero;
  layer.zero_grad();
  ops::sum(layer.forward(x).y * target).backward();
  (cut_score ? layer.score_grad_hook : layer.vse_grad_hook) = nullptr;
  const int64_t r = layer.cfg.routing_neurons;
  return {layer.w.gate.grad().narrow(2, 0, r), layer.w.up.grad().narrow(2, 0, r)};
}

class GradientPaths : public ::testing::TestWithParam<nn::ScoreSource> {};

TEST_P(GradientPaths, PartsSumToTheFullGradientAndEachEqualsTheOtherPathCut) {
  nn::ModelConfig c = diagonal_config(nn::FfnKind::UoE, 2);
  c.d_model = 8;
  c.ffn.expert_width = 6;
  c.ffn.n_experts = 5;
  c.ffn.score = GetParam();
  nn::UoeFfn layer(c, 0.3);
  layer.to(DType::Float64);
  const Tensor x = random_double({9, 8}, 3), target = random_double({9, 8}, 4);
  RoutingGradientSplit s;
  {
    GradientPathProbe probe(layer);
    layer.zero_grad();
    ops::sum(layer.forward(x).y * target).backward();
    s = probe.split();
  }
  EXPECT_FALSE(layer.vse_grad_hook || layer.score_grad_hook);  // the probe removed its hooks
  EXPECT_LT(max_abs_diff(s.vse_gate + s.score_gate, s.full_gate), 1e-12);
  EXPECT_LT(max_abs_diff(s.vse_up + s.score_up, s.full_up), 1e-12);
  EXPECT_GT(max_abs_diff(s.vse_gate, zeros_like(s.vse_gate)), 1e-6);
  EXPECT_GT(max_abs_diff(s.score_gate, zeros_like(s.score_gate)), 1e-6);
  const auto [vse_gate, vse_up] = cut_path(layer, x, target, /*cut_score=*/true);
  EXPECT_LT(max_abs_diff(vse_gate, s.vse_gate), 1e-12);
  EXPECT_LT(max_abs_diff(vse_up, s.vse_up), 1e-12);
  const auto [score_gate, score_up] = cut_path(layer, x, target, /*cut_score=*/false);
  EXPECT_LT(max_abs_diff(score_gate, s.score_gate), 1e-12);
  EXPECT_LT(max_abs_diff(score_up, s.score_up), 1e-12);
  const PathNorms p = path_norms(s);
  for (size_t i = 0; i < p.full.size(); ++i) {
    EXPECT_LT(p.rest[i], 1e-12 * (1 + p.full[i]));
    EXPECT_LE(std::fabs(p.cosine[i]), 1.0 + 1e-12);
  }
}

INSTANTIATE_TEST_SUITE_P(Scores, GradientPaths, ::testing::Values(nn::ScoreSource::SwiGLU, nn::ScoreSource::GateSilu, nn::ScoreSource::Gate));

TEST(GradientPathsFullExpert, SelectedExpertsAreAThirdPath) {
  nn::ModelConfig c = diagonal_config(nn::FfnKind::UoE, 2);
  c.d_model = 8;
  c.ffn.combine = nn::Combine::FullExpert;
  nn::UoeFfn layer(c, 0.3);
  layer.to(DType::Float64);
  GradientPathProbe probe(layer);
  layer.zero_grad();
  ops::sum(layer.forward(random_double({9, 8}, 5)).y * random_double({9, 8}, 6)).backward();
  const PathNorms p = path_norms(probe.split());
  double rest = 0;
  for (double v : p.rest) rest += v;
  EXPECT_GT(rest, 1e-6);  // the selected experts' own neurons [0, r) carry gradient too
}

TEST(GradientPathsModel, EveryUoeLayerOfAModelIsSplit) {
  nn::LanguageModel model(test::micro_config(nn::FfnKind::UoE));
  std::vector<int64_t> ids(2 * 16), next(2 * 16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i * 37 % 251), next[i] = int64_t((i + 1) * 37 % 251);
  const TensorOptions i64 = TensorOptions{}.with_dtype(DType::Int64);
  const auto splits = routing_gradient_paths(model, from_vector(ids, {2, 16}, i64), from_vector(next, {2, 16}, i64));
  ASSERT_EQ(splits.size(), 2u);
  for (const RoutingGradientSplit& s : splits) {
    // float32 model: the parts add up to rounding
    const double scale = max_abs_diff(s.full_gate, zeros_like(s.full_gate));
    EXPECT_GT(scale, 0);
    EXPECT_LT(max_abs_diff(s.vse_gate + s.score_gate, s.full_gate), 1e-4 * scale);
    EXPECT_LT(max_abs_diff(s.vse_up + s.score_up, s.full_up), 1e-4 * max_abs_diff(s.full_up, zeros_like(s.full_up)));
  }
  nn::LanguageModel moe(test::micro_config(nn::FfnKind::MoE));
  testing::expect_error([&] { routing_gradient_paths(moe, from_vector(ids, {2, 16}, i64), from_vector(next, {2, 16}, i64)); },
                        {"gradient paths", "no UoE layer", "moe"});
}

TEST(GradientPathsModel, NoGradAndCheckpointedForwardsRunWithAProbe) {
  // The probe's hooks go only on tensors with a graph: a no-grad forward runs, and with activation checkpointing
  // (whose first forward runs without grad) the recomputation records the same paths.
  nn::LanguageModel model(test::micro_config(nn::FfnKind::UoE));
  std::vector<int64_t> ids(2 * 16), next(2 * 16);
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = int64_t(i * 37 % 251), next[i] = int64_t((i + 1) * 37 % 251);
  const TensorOptions i64 = TensorOptions{}.with_dtype(DType::Int64);
  const Tensor x = from_vector(ids, {2, 16}, i64), y = from_vector(next, {2, 16}, i64);
  {
    GradientPathProbe probe(*dynamic_cast<nn::UoeFfn*>(model.blocks[0]->ffn.get()));
    NoGradGuard no_grad;
    EXPECT_TRUE(std::isfinite(model.loss(x, y).item<float>()));
  }
  const auto plain = routing_gradient_paths(model, x, y);
  model.checkpoint_activations = true;
  const auto checkpointed = routing_gradient_paths(model, x, y);
  ASSERT_EQ(checkpointed.size(), plain.size());
  auto expect_same = [](const Tensor& a, const Tensor& b) {
    const double scale = max_abs_diff(a, zeros_like(a));
    EXPECT_GT(scale, 0);
    EXPECT_LE(max_abs_diff(a, b), 1e-5 * scale);
  };
  for (size_t i = 0; i < plain.size(); ++i) {
    expect_same(plain[i].vse_gate, checkpointed[i].vse_gate);
    expect_same(plain[i].vse_up, checkpointed[i].vse_up);
    expect_same(plain[i].score_gate, checkpointed[i].score_gate);
    expect_same(plain[i].score_up, checkpointed[i].score_up);
    expect_same(plain[i].full_gate, checkpointed[i].full_gate);
  }
}

}  // namespace
}  // namespace uoe::analysis
