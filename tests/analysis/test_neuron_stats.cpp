// Neuron-level analysis recomputed by hand: rank statistics, the routing-neuron statistics by counting, the neuron
// scan on a MoE whose best neuron is known, the shared part's share in its limits, the own aux-loss gradient as the
// difference it makes to the score path, top tokens, co-selection and the flags.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "analysis/gradient_paths.h"
#include "analysis/neuron_stats.h"
#include "analysis/routing_analysis.h"
#include "analysis/routing_flags.h"
#include "analysis/statistics.h"
#include "autograd/grad_mode.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe::analysis {
namespace {

using testing::max_abs_diff;
using testing::random_double;

nn::ModelConfig small_config(nn::FfnKind kind) {
  nn::ModelConfig c;
  c.d_model = 8;
  c.ffn.kind = kind;
  c.ffn.n_experts = 4;
  c.ffn.top_k = 2;
  c.ffn.expert_width = 6;
  c.ffn.routing_neurons = 2;
  return c;
}

// Every row of the traced forward of `ffn` on x, through an accumulator: its routing and its sample.
LayerAccumulator traced(nn::Ffn& ffn, const Tensor& x, int64_t n, int64_t K) {
  ffn.record = true;
  ffn.forward(x);
  LayerAccumulator acc(n, K);
  acc.add_routing(ffn.trace);
  std::vector<int64_t> rows;
  for (int64_t t = 0; t < x.size(0); ++t) rows.push_back(t);
  acc.add_activations(ffn, ffn.trace, rows);
  return acc;
}

double pearson_by_hand(const std::vector<double>& a, const std::vector<double>& b) {
  double ma = 0, mb = 0;
  for (size_t i = 0; i < a.size(); ++i) ma += a[i] / double(a.size()), mb += b[i] / double(b.size());
  double ab = 0, aa = 0, bb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    ab += (a[i] - ma) * (b[i] - mb);
    aa += (a[i] - ma) * (a[i] - ma);
    bb += (b[i] - mb) * (b[i] - mb);
  }
  return ab / std::sqrt(aa * bb);
}

TEST(AnalysisStatistics, AucAndOverlapByHand) {
  EXPECT_DOUBLE_EQ(auc({1, 2, 3, 4}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auc({4, 3, 2, 1}, {0, 0, 1, 1}), 0.0);
  EXPECT_DOUBLE_EQ(auc({1, 3, 2, 4}, {0, 1, 0, 1}), 1.0);
  EXPECT_DOUBLE_EQ(auc({1, 3, 2, 4}, {1, 0, 0, 1}), 0.5);  // pairs (1 vs 3, 2), (4 vs 3, 2): 2 of 4
  EXPECT_DOUBLE_EQ(auc({5, 5}, {0, 1}), 0.5);              // a tie counts one half
  EXPECT_TRUE(std::isnan(auc({1, 2}, {1, 1})));
  EXPECT_DOUBLE_EQ(selection_overlap({0.1, 0.9, 0.5, 0.7}, {1, 2}), 0.5);  // top-2 by ref: {1, 3}
  EXPECT_DOUBLE_EQ(selection_overlap({0.1, 0.9, 0.5, 0.7}, {3, 1}), 1.0);
  EXPECT_DOUBLE_EQ(selection_overlap({0.1, 0.9}, {}), 0.0);
  EXPECT_TRUE(std::isnan(pearson({1, 1, 1}, {1, 2, 3})));
  EXPECT_NEAR(pearson({1, 2, 3}, {2, 4, 7}), pearson_by_hand({1, 2, 3}, {2, 4, 7}), 1e-15);
}

TEST(NeuronStats, RoutingNeuronStatisticsRecountedByHand) {
  const nn::ModelConfig c = small_config(nn::FfnKind::UoE);
  nn::UoeFfn layer(c, 0.3);
  layer.to(DType::Float64);
  const int64_t T = 40, d = 8, n = 4, D = 6, r = 2;
  const Tensor x = random_double({T, d}, 21);
  const LayerAccumulator acc = traced(layer, x, n, 2);
  const NeuronAnalysis a = analyze_neurons(layer, acc.sample());
  ASSERT_TRUE(a.has_routing_neurons);
  ASSERT_EQ(a.routing.rate.size(), size_t(n * r));
  const std::vector<double> xs = x.to_vector<double>(), wg = layer.w.gate.to_vector<double>(),
                            wu = layer.w.up.to_vector<double>();
  const std::vector<int64_t> idx = layer.trace.route.indices.to_vector<int64_t>();
  for (int64_t e = 0; e < n; ++e)
    for (int64_t j = 0; j < r; ++j) {
      double open = 0, sum_abs = 0;
      std::vector<double> act, selected;
      for (int64_t t = 0; t < T; ++t) {
        double g = 0, u = 0;
        for (int64_t k = 0; k < d; ++k) {
          g += xs[size_t(t * d + k)] * wg[size_t((e * d + k) * D + j)];
          u += xs[size_t(t * d + k)] * wu[size_t((e * d + k) * D + j)];
        }
        const double h = g / (1 + std::exp(-g)) * u;
        open += g > 0;
        sum_abs += std::abs(h);
        act.push_back(std::abs(h));
        selected.push_back(idx[size_t(t * 2)] == e || idx[size_t(t * 2 + 1)] == e);
      }
      const size_t i = size_t(e * r + j);
      EXPECT_DOUBLE_EQ(a.routing.rate[i], open / double(T)) << i;
      EXPECT_NEAR(a.routing.mean_abs[i], sum_abs / double(T), 1e-12) << i;
      EXPECT_NEAR(a.routing.corr[i], pearson_by_hand(act, selected), 1e-12) << i;
    }
  // The routing score is the norm over neurons [0, r): those neurons predict the selection exactly as the score does.
  for (int64_t e = 0; e < n; ++e) EXPECT_DOUBLE_EQ(a.scan.auc_first[size_t(e)], a.scan.auc_score[size_t(e)]);
  EXPECT_DOUBLE_EQ(a.scan.overlap_first, 1.0);
  EXPECT_DOUBLE_EQ(a.scan.random_overlap, 0.5);
  EXPECT_EQ(a.scan.pick_tokens + a.scan.test_tokens, T);
}

TEST(NeuronStats, TopPRoutingWithEmptySlots) {
  nn::ModelConfig c = small_config(nn::FfnKind::UoE);
  c.ffn.routing = nn::Routing::TopP;
  c.ffn.top_p = 0.4;
  nn::UoeFfn layer(c, 0.3);
  layer.to(DType::Float64);
  const LayerAccumulator acc = traced(layer, random_double({30, 8}, 28), 4, 4);  // top-p: n slots, some empty
  const std::vector<int64_t> idx = acc.sample().indices;
  EXPECT_NE(std::count(idx.begin(), idx.end(), -1), 0);
  const NeuronAnalysis a = analyze_neurons(layer, acc.sample());
  EXPECT_DOUBLE_EQ(a.scan.overlap_first, 1.0);  // the routing neurons' norm is the score, whatever k_t is
  EXPECT_GT(a.scan.random_overlap, 0.0);
  EXPECT_LT(a.scan.random_overlap, 1.0);
  EXPECT_TRUE(a.has_shared && a.shared_share > 0 && a.shared_share < 1) << a.shared_share;
}

TEST(NeuronStats, ScanFindsTheNeuronThatCarriesAMoeRoutersChoice) {
  // Router logit i = x_i. Neuron 2 of expert i reads x_i (gate and up), the others read x_{i+1}: on positive
  // inputs |h| of neuron 2 rises with x_i, so it is the best neuron and routes exactly like the router.
  nn::ModelConfig c = small_config(nn::FfnKind::MoE);
  c.d_model = 4;
  c.ffn.routing_neurons = 1;
  nn::MoeFfn layer(c, 0.3);
  layer.to(DType::Float64);
  const int64_t n = 4, d = 4, D = 6, T = 60;
  {
    NoGradGuard no_grad;
    std::vector<double> router(size_t(d * n), 0.0), w(size_t(n * d * D), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      router[size_t(i * n + i)] = 1.0;
      for (int64_t j = 0; j < D; ++j) w[size_t((i * d + (j == 2 ? i : (i + 1) % d)) * D + j)] = 1.0;
    }
    const TensorOptions f64 = TensorOptions{}.with_dtype(DType::Float64);
    layer.router.copy_(from_vector(router, {d, n}, f64));
    layer.w.gate.copy_(from_vector(w, {n, d, D}, f64));
    layer.w.up.copy_(from_vector(w, {n, d, D}, f64));
  }
  const LayerAccumulator acc = traced(layer, random_double({T, d}, 22, /*positive=*/true), n, 2);
  const NeuronAnalysis a = analyze_neurons(layer, acc.sample());
  EXPECT_FALSE(a.has_routing_neurons);
  ASSERT_EQ(a.scan.best.size(), size_t(n));
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(a.scan.best[size_t(i)].size(), 1u);
    EXPECT_EQ(a.scan.best[size_t(i)][0], 2) << "expert " << i;
    EXPECT_DOUBLE_EQ(a.scan.auc_best[size_t(i)], a.scan.auc_score[size_t(i)]) << "expert " << i;
    EXPECT_GT(a.scan.auc_best[size_t(i)], 0.75);  // not 1: whether x_i is in the top 2 depends on the others too
  }
  EXPECT_DOUBLE_EQ(a.scan.overlap_best, 1.0);
  EXPECT_LT(a.scan.overlap_first, 1.0);  // neuron 0 reads the neighbour's coordinate
}

TEST(NeuronStats, SharedShareIsOneWithoutRoutedOutputAndZeroWithoutTheVse) {
  const nn::ModelConfig c = small_config(nn::FfnKind::UoE);
  for (const bool keep_vse : {true, false}) {
    nn::UoeFfn layer(c, 0.3);
    layer.to(DType::Float64);
    {
      NoGradGuard no_grad;  // zero W_down's rows of the routed neurons [r, D), or of the routing neurons [0, r)
      const Tensor rows = layer.w.down.narrow(1, keep_vse ? 2 : 0, keep_vse ? 4 : 2);
      Tensor(rows).copy_(zeros_like(rows));
    }
    const LayerAccumulator acc = traced(layer, random_double({20, 8}, 23), 4, 2);
    const NeuronAnalysis a = analyze_neurons(layer, acc.sample());
    ASSERT_TRUE(a.has_shared);
    EXPECT_NEAR(a.shared_share, keep_vse ? 1.0 : 0.0, 1e-12);
  }
  nn::ModelConfig aoe = small_config(nn::FfnKind::AoE);
  aoe.ffn.d_low = 3;
  nn::AoeFfn layer(aoe, 0.3);
  layer.to(DType::Float64);
  const LayerAccumulator acc = traced(layer, random_double({20, 8}, 24), 4, 2);
  EXPECT_FALSE(analyze_neurons(layer, acc.sample()).has_shared);
}

// The split of sum(y ⊙ target) + aux through a probed layer, with the layer's own aux-loss part.
RoutingGradientSplit split_with_aux(nn::UoeFfn& layer, const Tensor& x, const Tensor& target) {
  GradientPathProbe probe(layer);
  layer.zero_grad();
  const nn::FfnOut out = layer.forward(x);
  Tensor loss = ops::sum(out.y * target);
  if (out.aux.defined()) loss = loss + out.aux;
  loss.backward();
  RoutingGradientSplit s = probe.split();
  std::tie(s.aux_gate, s.aux_up) = own_aux_gradient(layer);
  return s;
}

TEST(GradientPathsAux, TheOwnAuxLossIsWhatItAddsToTheScorePath) {
  nn::ModelConfig c = small_config(nn::FfnKind::UoE);
  c.ffn.aux_loss = 0.5;
  nn::UoeFfn with_aux(c, 0.3);
  with_aux.to(DType::Float64);
  c.ffn.aux_loss = 0;
  nn::UoeFfn without(c, 0.3);
  without.to(DType::Float64);
  {
    NoGradGuard no_grad;  // the same weights
    without.w.gate.copy_(with_aux.w.gate);
    without.w.up.copy_(with_aux.w.up);
    without.w.down.copy_(with_aux.w.down);
  }
  const Tensor x = random_double({12, 8}, 25), target = random_double({12, 8}, 26);
  const RoutingGradientSplit a = split_with_aux(with_aux, x, target), b = split_with_aux(without, x, target);
  EXPECT_FALSE(b.aux_gate.defined());
  ASSERT_TRUE(a.aux_gate.defined());
  EXPECT_GT(max_abs_diff(a.aux_gate, zeros_like(a.aux_gate)), 1e-6);
  EXPECT_LT(max_abs_diff(a.score_gate - a.aux_gate, b.score_gate), 1e-12);
  EXPECT_LT(max_abs_diff(a.score_up - a.aux_up, b.score_up), 1e-12);
  EXPECT_LT(max_abs_diff(a.vse_gate, b.vse_gate), 1e-12);
  // Norms: routing weights = ‖score − aux‖; per neuron, the squares add up to the expert's.
  const PathNorms expert = path_norms(a), neuron = path_norms(a, true), plain = path_norms(b);
  ASSERT_EQ(neuron.aux.size(), 4u * 2u);
  for (size_t e = 0; e < 4; ++e) {
    EXPECT_NEAR(expert.weights[e], plain.score[e], 1e-12);
    EXPECT_NEAR(plain.aux[e], 0.0, 0.0);
    for (const auto& [per_expert, per_neuron] : {std::pair{&expert.aux, &neuron.aux}, {&expert.vse, &neuron.vse},
                                                 {&expert.weights, &neuron.weights}, {&expert.full, &neuron.full}}) {
      const double sq = (*per_neuron)[2 * e] * (*per_neuron)[2 * e] + (*per_neuron)[2 * e + 1] * (*per_neuron)[2 * e + 1];
      EXPECT_NEAR(sq, (*per_expert)[e] * (*per_expert)[e], 1e-12 * (1 + sq));
    }
  }
}

TEST(RoutingCounts, CoselectionAndTopTokensRecounted) {
  const nn::ModelConfig c = small_config(nn::FfnKind::UoE);
  nn::UoeFfn layer(c, 0.3);
  layer.to(DType::Float64);
  const int64_t T = 30, n = 4;
  layer.record = true;
  layer.forward(random_double({T, 8}, 27));
  std::vector<int64_t> ids;
  for (int64_t t = 0; t < T; ++t) ids.push_back(t % 5);
  LayerAccumulator acc(n, 2);
  acc.add_routing(layer.trace, ids);
  const LayerAnalysis l = acc.finish(4);
  const std::vector<int64_t> idx = layer.trace.route.indices.to_vector<int64_t>();
  std::vector<double> both(size_t(n * n), 0.0);
  std::vector<std::vector<int64_t>> count(5, std::vector<int64_t>(size_t(n), 0));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t a = 0; a < 2; ++a) {
      count[size_t(ids[size_t(t)])][size_t(idx[size_t(t * 2 + a)])] += 1;
      for (int64_t b = 0; b < 2; ++b) both[size_t(idx[size_t(t * 2 + a)] * n + idx[size_t(t * 2 + b)])] += 1.0 / T;
    }
  ASSERT_EQ(l.coselection.size(), both.size());
  for (size_t i = 0; i < both.size(); ++i) EXPECT_NEAR(l.coselection[i], both[i], 1e-12) << i;
  for (int64_t e = 0; e < n; ++e) EXPECT_NEAR(l.coselection[size_t(e * n + e)], 2 * l.load[size_t(e)], 1e-12);
  ASSERT_EQ(l.top_tokens.size(), size_t(n));
  for (int64_t e = 0; e < n; ++e)
    for (const TopToken& t : l.top_tokens[size_t(e)]) {
      EXPECT_EQ(t.count, count[size_t(t.id)][size_t(e)]);
      EXPECT_DOUBLE_EQ(t.share, double(t.count) / double(T / 5));  // every id occurs T / 5 times
    }
  // Ranking: count × share first; for equal products the larger count, then the lower id.
  const auto top = top_tokens({{7, {4, 0, 4}}, {3, {2, 2, 2}}, {9, {1, 3, 4}}, {5, {4, 0, 8}}}, 2, 3);
  ASSERT_EQ(top[0].size(), 3u);
  EXPECT_EQ(top[0][0].id, 7);  // 4 · 1
  EXPECT_EQ(top[0][1].id, 5);  // 4 · 0.5 = 2, count 4
  EXPECT_EQ(top[0][2].id, 3);  // 2 · 1 = 2, count 2
  EXPECT_EQ(top[1].size(), 2u);  // only the ids the expert took
  EXPECT_EQ(top[1][0].id, 9);
}

AnalysisResult flagged(const std::vector<double>& load, double overlap) {
  AnalysisResult r;
  LayerAnalysis l;
  l.n_experts = int64_t(load.size());
  l.load = load;
  l.full.overlap = overlap;
  l.full.random_overlap = 0.25;
  l.full.overlap_se = 0.01;
  l.full.tokens = 1000;
  r.layers.push_back(l);
  return r;
}

TEST(RoutingFlags, DeadExpertsAndBelowChanceAgreementFireOnlyWhenTheyShould) {
  const std::vector<RoutingFlag> bad = routing_flags(flagged({0.5, 0.49, 0.01, 0.0}, 0.03));
  ASSERT_EQ(bad.size(), 3u);
  EXPECT_EQ(bad[0].kind, "dead_expert");
  EXPECT_EQ(bad[0].expert, 2);
  EXPECT_NE(bad[0].message.find("load 0.0100"), std::string::npos) << bad[0].message;
  EXPECT_EQ(bad[1].expert, 3);
  EXPECT_NE(bad[1].message.find("never selected"), std::string::npos) << bad[1].message;
  EXPECT_EQ(bad[2].kind, "below_chance_agreement");
  EXPECT_EQ(bad[2].expert, -1);
  EXPECT_DOUBLE_EQ(bad[2].threshold, 0.25 - kChanceStandardErrors * 0.01);
  EXPECT_NE(bad[2].message.find("top-K overlap 0.030, random 0.250"), std::string::npos) << bad[2].message;
  // balanced load, overlap above chance; and an overlap just under chance but within two standard errors
  EXPECT_TRUE(routing_flags(flagged({0.3, 0.2, 0.26, 0.24}, 0.6)).empty());
  EXPECT_TRUE(routing_flags(flagged({0.3, 0.2, 0.26, 0.24}, 0.24)).empty());
  EXPECT_EQ(routing_flags(flagged({0.3, 0.2, 0.26, 0.24}, 0.22)).size(), 1u);
  // the dead threshold is a tenth of the uniform share 1/n
  EXPECT_EQ(routing_flags(flagged({0.49, 0.49, 0.026, 0.0}, 0.6)).size(), 1u);
}

}  // namespace
}  // namespace uoe::analysis
