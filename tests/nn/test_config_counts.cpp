// Model configurations and their counts: the presets' parameters and FLOPs per token against counts made by
// hand from UOE.md, what combine = full_expert costs, and configurations that cannot build a model.
#include <gtest/gtest.h>

#include "core/json.h"
#include "gradcheck.h"
#include "nn/accounting.h"
#include "nn/config.h"

namespace uoe::nn {
namespace {

using uoe::testing::expect_error;

// 3b-uoe (12 layers, d 1536, 16 heads, 64 experts of width 768, top-8, r = 12, vocab 50304, tied embeddings),
// counted by hand: attention 4 d² per layer; FFN n 3 d D (active 3 d n r + K 3 d (D - r)); two norms per layer
// and a final one; forward FLOPs 2 x active weights + causal attention at full context.
TEST(ConfigCounts, ThreeBillionUoeMatchesTheHandCount) {
  const ModelCounts k = count_model(load_model_config("3b-uoe"));
  EXPECT_DOUBLE_EQ(k.total, 2908460544.0);
  EXPECT_DOUBLE_EQ(k.active, 567449088.0);
  EXPECT_DOUBLE_EQ(k.flops, 1210318848.0);
}

TEST(ConfigCounts, FullExpertCombineRunsTheSelectedExpertsRoutingNeuronsAgain) {
  ModelConfig vse = load_model_config("tiny-uoe"), full = vse;
  full.ffn.combine = "full_expert";
  const ModelCounts a = count_model(vse), b = count_model(full);
  const double extra = double(vse.n_layers) * 3 * double(vse.d_model) * double(vse.ffn.top_k) *
                       double(vse.ffn.routing_neurons);  // K experts x r neurons x 3 d weights, per layer
  EXPECT_DOUBLE_EQ(b.active - a.active, extra);
  EXPECT_DOUBLE_EQ(b.flops - a.flops, 2 * extra);
  EXPECT_DOUBLE_EQ(b.total, a.total);
}

TEST(ConfigCounts, ConfigurationsThatCannotBuildAModelAreRefused) {
  const auto with = [](const std::string& ffn) {
    return json::parse("{\"name\": \"x\", \"d_model\": 64, \"n_layers\": 1, \"n_heads\": 4, \"ffn\": " + ffn + "}",
                       "test");
  };
  expect_error([&] { model_config_from_json(with("{\"kind\": \"aoe\", \"expert_width\": 0}"), "aoe0.json"); },
               {"[config] aoe0.json: ffn.expert_width 0 must be at least 1 for an expert FFN"});
  expect_error([&] { model_config_from_json(with("{\"kind\": \"dense\", \"hidden\": 0}"), "dense0.json"); },
               {"[config] dense0.json: ffn.hidden 0 must be at least 1"});
  expect_error([&] { model_config_from_json(with("{\"kind\": \"moe\", \"n_experts\": 4, \"top_k\": 5}"), "k.json"); },
               {"ffn.top_k 5 must be in [1, n_experts = 4]"});
}

}  // namespace
}  // namespace uoe::nn
