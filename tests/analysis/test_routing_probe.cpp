// The per-evaluation routing probe (metrics.jsonl "routing"): the numbers of `uoe analyze` on the same tokens, logged
// on evaluation steps only, plausible for every routed kind, and without any effect on the training losses.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "analysis/routing_analysis.h"
#include "analysis/routing_probe.h"
#include "core/rng.h"
#include "fixtures.h"
#include "nn/checkpoint.h"
#include "nn/trainer.h"

namespace uoe::analysis {
namespace {

std::vector<double> losses(const std::string& out, const std::string& field) {
  std::vector<double> v;
  for (const json::Value& line : test::metric_lines(out))
    if (line.contains(field)) v.push_back(line.at(field).as_double());
  return v;
}

class RoutingProbeRuns : public ::testing::TestWithParam<nn::FfnKind> {};

TEST_P(RoutingProbeRuns, EvaluationLinesCarryPlausibleStatisticsAndTheLossesDoNotChange) {
  const nn::FfnKind kind = GetParam();
  const std::string dir = test::temp_dir(std::string("routing_probe_") + nn::ffn_kind_name(kind));
  auto data = test::micro_data(dir);
  auto tok = nn::make_byte_tokenizer();
  const nn::ModelConfig config = test::micro_config(kind);
  nn::TrainOptions o = test::micro_train_options(dir + "/plain", 7);
  o.eval_every = 3;
  nn::train(config, o, *data, *tok);
  o.out_dir = dir + "/probed";
  o.routing_probe = RoutingProbe(*data, o.seq, 64);
  nn::train(config, o, *data, *tok);
  EXPECT_EQ(losses(dir + "/plain", "train_loss"), losses(dir + "/probed", "train_loss"));
  EXPECT_EQ(losses(dir + "/plain", "val_loss"), losses(dir + "/probed", "val_loss"));

  const double n = double(config.ffn.n_experts);
  int64_t probed = 0;
  for (const json::Value& line : test::metric_lines(dir + "/probed")) {
    ASSERT_EQ(line.contains("routing"), line.contains("val_loss")) << line.dump();
    if (!line.contains("routing")) continue;
    ++probed;
    const json::Value& r = line.at("routing");
    EXPECT_EQ(r.at("tokens").as_int(), 64);
    EXPECT_GE(r.at("seconds").as_double(), 0.0);
    ASSERT_EQ(r.at("layers").size(), size_t(config.n_layers));
    for (const json::Value& l : r.at("layers").as_array()) {
      EXPECT_GE(l.at("agreement").as_double(), 0.0) << l.dump();
      EXPECT_LE(l.at("agreement").as_double(), 1.0) << l.dump();
      EXPECT_DOUBLE_EQ(l.at("agreement_chance").as_double(), double(config.ffn.top_k) / n);
      EXPECT_GT(l.at("load_entropy").as_double(), 0.0) << l.dump();
      EXPECT_LE(l.at("load_entropy").as_double(), std::log(n) + 1e-12) << l.dump();
      EXPECT_EQ(l.contains("grad_vse"), kind == nn::FfnKind::UoE);
      EXPECT_EQ(l.contains("grad_score"), kind == nn::FfnKind::UoE);
      if (kind != nn::FfnKind::UoE) continue;
      EXPECT_GT(l.at("grad_vse").as_double(), 0.0) << l.dump();
      EXPECT_GT(l.at("grad_score").as_double(), 0.0) << l.dump();
    }
  }
  EXPECT_EQ(probed, 3);  // steps 3, 6 and the last
}

INSTANTIATE_TEST_SUITE_P(Kinds, RoutingProbeRuns,
                         ::testing::Values(nn::FfnKind::MoE, nn::FfnKind::AoE, nn::FfnKind::UoE),
                         [](const auto& info) { return std::string(nn::ffn_kind_name(info.param)); });

// bfloat16 compute and bfloat16 parameters give the layer input and the expert weights different dtypes.
TEST(RoutingProbe, RunsWithBfloat16ComputeAndParameters) {
  const std::string dir = test::temp_dir("routing_probe_bf16");
  auto data = test::micro_data(dir);
  auto tok = nn::make_byte_tokenizer();
  for (const nn::FfnKind kind : {nn::FfnKind::AoE, nn::FfnKind::UoE})
    for (const bool bf16_params : {false, true}) {
      nn::TrainOptions o = test::micro_train_options(dir + "/" + nn::ffn_kind_name(kind) + (bf16_params ? "p" : "c"), 2);
      if (bf16_params) o.param_dtype = DType::BFloat16;
      else o.compute_dtype = DType::BFloat16;
      o.routing_probe = RoutingProbe(*data, o.seq, 32);
      nn::train(test::micro_config(kind), o, *data, *tok);
      const json::Value layer = test::metric_lines(o.out_dir).back().at("routing").at("layers").as_array()[0];
      EXPECT_GE(layer.at("agreement").as_double(), 0.0) << o.out_dir;
      EXPECT_EQ(layer.contains("grad_vse"), kind == nn::FfnKind::UoE) << o.out_dir;
    }
}

// The probe's numbers are uoe analyze's on the same windows; it leaves the model's mode, gradients and the random
// generator as they were.
TEST(RoutingProbe, MatchesTheAnalysisOfTheSameTokensAndLeavesTheModelAsItWas) {
  const std::string dir = test::temp_dir("routing_probe_analysis");
  auto data = test::micro_data(dir);
  auto tok = nn::make_byte_tokenizer();
  nn::TrainOptions o = test::micro_train_options(dir + "/run", 10);
  nn::train(test::micro_config(nn::FfnKind::UoE), o, *data, *tok);
  nn::LanguageModel model(test::micro_config(nn::FfnKind::UoE));
  model.load_state_dict(nn::load_checkpoint(dir + "/run/checkpoint").model);
  model.train();
  const uint64_t offset = default_generator().offset();
  const json::Value probed = RoutingProbe(*data, 32, 96)(model);  // 3 windows of 32
  EXPECT_TRUE(model.is_training());
  EXPECT_EQ(default_generator().offset(), offset);
  for (const auto& [name, p] : model.named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
  for (auto& b : model.blocks) EXPECT_FALSE(b->ffn->record);

  AnalysisOptions a;
  a.tokens = 96;
  a.seq = 32;
  a.activation_tokens = 96;
  a.gradient_windows = 3;
  const AnalysisResult expected = analyze(model, data->file(), data->val_begin(), *tok, a);
  ASSERT_EQ(probed.at("layers").size(), expected.layers.size());
  for (size_t l = 0; l < expected.layers.size(); ++l) {
    const json::Value& got = probed.at("layers").as_array()[l];
    const LayerAnalysis& want = expected.layers[l];
    EXPECT_DOUBLE_EQ(got.at("agreement").as_double(), want.full.overlap) << "layer " << l;
    EXPECT_DOUBLE_EQ(got.at("agreement_chance").as_double(), want.full.random_overlap) << "layer " << l;
    EXPECT_NEAR(got.at("load_entropy").as_double(), want.load_entropy * std::log(4.0), 1e-12) << "layer " << l;
    const auto norm = [](const std::vector<double>& v) { return std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0)); };
    EXPECT_NEAR(got.at("grad_vse").as_double(), norm(want.gradient.vse), 1e-6 * norm(want.gradient.vse)) << l;
    EXPECT_NEAR(got.at("grad_score").as_double(), norm(want.gradient.score), 1e-6 * norm(want.gradient.score)) << l;
  }
}

}  // namespace
}  // namespace uoe::analysis
