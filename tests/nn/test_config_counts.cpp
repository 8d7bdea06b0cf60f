// Model configurations and their counts: the presets' parameters and FLOPs per token against counts made by
// hand from docs/UOE.md, what combine = full_expert costs, and configurations that cannot build a model.
#include <gtest/gtest.h>

#include "core/json.h"
#include "gradcheck.h"
#include "nn/accounting.h"
#include "nn/config.h"
#include "nn/transformer.h"

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

// The bar of issue 21: every MoE, AoE and dense preset computes UoE's active FLOPs per token, within 1%, and each
// kind's FFN weights follow the derivation stated in nn/config.cpp.
TEST(ConfigCounts, EveryPresetMatchesUoesActiveFlopsWithinOnePercent) {
  for (const char* family : {"tiny", "small", "1b", "3b"}) {
    const std::string f = family;
    const ModelConfig uoe = load_model_config(f + "-uoe");
    const double flops = count_model(uoe).flops;
    const double d = double(uoe.d_model), n = double(uoe.ffn.n_experts), K = double(uoe.ffn.top_k),
                 D = double(uoe.ffn.expert_width), r = double(uoe.ffn.routing_neurons);
    for (const char* kind : {"moe", "aoe", "dense"}) {
      const ModelConfig c = load_model_config(f + "-" + kind);
      EXPECT_NEAR(count_model(c).flops / flops, 1.0, 0.01) << c.name;
    }
    EXPECT_EQ(double(load_model_config(f + "-dense").ffn.hidden), n * r + K * (D - r)) << family;
    EXPECT_EQ(double(load_model_config(f + "-moe").ffn.shared_width), (n - K) * r) << family;
    const ModelConfig aoe = load_model_config(f + "-aoe");
    EXPECT_EQ(double(aoe.ffn.d_low), 3 * r) << family;
    // parameter parity with a MoE of width D, to the rounding of d_wide
    const double low = double(aoe.ffn.d_low), wide = double(aoe.ffn.expert_width);
    EXPECT_NEAR(low * d + low * wide + 2 * d * wide, 3 * d * D, 0.5 * (low + 2 * d)) << family;
  }
}

// An AoE shared expert adds its 3 d w weights to the total and the active counts alike.
TEST(ConfigCounts, AnAoeSharedExpertIsCountedAsActive) {
  ModelConfig plain = load_model_config("tiny-aoe"), shared = plain;
  shared.ffn.shared_width = 100;
  const double extra = double(plain.n_layers) * 3 * double(plain.d_model) * 100;
  EXPECT_DOUBLE_EQ(count_model(shared).total - count_model(plain).total, extra);
  EXPECT_DOUBLE_EQ(count_model(shared).active - count_model(plain).active, extra);
}

TEST(ConfigCounts, FullExpertCombineRunsTheSelectedExpertsRoutingNeuronsAgain) {
  ModelConfig vse = load_model_config("tiny-uoe"), full = vse;
  full.ffn.combine = Combine::FullExpert;
  const ModelCounts a = count_model(vse), b = count_model(full);
  const double extra = double(vse.n_layers) * 3 * double(vse.d_model) * double(vse.ffn.top_k) *
                       double(vse.ffn.routing_neurons);  // K experts x r neurons x 3 d weights, per layer
  EXPECT_DOUBLE_EQ(b.active - a.active, extra);
  EXPECT_DOUBLE_EQ(b.flops - a.flops, 2 * extra);
  EXPECT_DOUBLE_EQ(b.total, a.total);
}

// A small model whose ffn object is the JSON text `ffn`.
json::Value with(const std::string& ffn) {
  return json::parse("{\"name\": \"x\", \"d_model\": 64, \"n_layers\": 1, \"n_heads\": 4, \"ffn\": " + ffn + "}",
                     "test");
}

// The configuration whose ffn object is `ffn` is refused with an error that contains `expected`.
void expect_refused(const std::string& ffn, const std::string& source, const std::string& expected) {
  expect_error([&] { model_config_from_json(with(ffn), source); }, {expected});
}

// A checkpoint of the earlier presets (MoE shared width n r, AoE d_low = d / 3) carries every field in its
// config.json, so it loads with its own widths.
TEST(ConfigCounts, ConfigsOfTheEarlierPresetsStillLoad) {
  const ModelConfig moe = model_config_from_json(
      with("{\"kind\": \"moe\", \"n_experts\": 8, \"top_k\": 2, \"expert_width\": 128, \"shared_width\": 128, "
           "\"routing_neurons\": 16, \"d_low\": 21}"),
      "old-moe.json");
  EXPECT_EQ(moe.ffn.shared_width, 128);
  const ModelConfig aoe = model_config_from_json(
      with("{\"kind\": \"aoe\", \"n_experts\": 8, \"top_k\": 2, \"expert_width\": 116, \"shared_width\": 0, "
           "\"routing_neurons\": 16, \"d_low\": 21}"),
      "old-aoe.json");
  EXPECT_EQ(aoe.ffn.d_low, 21);
  EXPECT_EQ(aoe.ffn.expert_width, 116);
  LanguageModel a(moe), b(aoe);  // and build
  EXPECT_GT(count_model(moe).total, 0);
}

TEST(ConfigCounts, ConfigurationsThatCannotBuildAModelAreRefused) {
  expect_refused("{\"kind\": \"aoe\", \"expert_width\": 0}", "aoe0.json",
                 "[config] aoe0.json: ffn.expert_width is 0, expected 1 to 1048576");
  expect_refused("{\"kind\": \"dense\", \"hidden\": 0}", "dense0.json",
                 "[config] dense0.json: ffn.hidden is 0, expected 1 to 1048576");
  expect_refused("{\"kind\": \"moe\", \"n_experts\": 4, \"top_k\": 5}", "k.json",
                 "[config] k.json: ffn.top_k is 5, expected 1 to 4");
  // A negative routing_neurons reached a [narrow] error deep in the model's construction.
  expect_refused("{\"kind\": \"uoe\", \"routing_neurons\": -1}", "r.json",
                 "[config] r.json: ffn.routing_neurons (0: expert_width / n_experts) is -1, expected 0 to 511");
  expect_refused("{\"aux_loss\": -0.5}", "aux.json",
                 "[config] aux.json: ffn.aux_loss is -0.5, expected a finite number >= 0");
}

// The switches are parsed once, into enums: an unknown name is refused with the valid ones listed, and so is a
// switch the chosen kind ignores; the names written by earlier versions (every field, defaults included) still load.
TEST(ConfigCounts, SwitchesAreParsedOnceAndOnlyWhereTheKindUsesThem) {
  expect_refused("{\"score\": \"norm\"}", "s.json",
                 "[config] s.json: ffn.score is 'norm', expected one of swiglu, gate_silu, gate");
  expect_refused("{\"kind\": \"mlp\"}", "k.json",
                 "[config] k.json: ffn.kind is 'mlp', expected one of dense, moe, aoe, uoe");
  expect_refused("{\"weights\": 1}", "w.json",
                 "[config] w.json: [json] key \"weights\": expected a string");
  expect_refused("{\"kind\": \"dense\", \"routing\": \"topp\"}", "d.json",
                 "[config] d.json: ffn.routing is 'topp', but ffn.kind dense ignores it (only moe, aoe, uoe use it): "
                 "leave it out or set 'topk'");
  expect_refused("{\"kind\": \"moe\", \"weights\": \"full_softmax\"}", "m.json",
                 "[config] m.json: ffn.weights is 'full_softmax', but ffn.kind moe ignores it (only aoe, uoe use it)");
  ModelConfig aoe = load_model_config("tiny-aoe");
  aoe.ffn.combine = Combine::FullExpert;
  expect_error([&] { LanguageModel m(aoe); }, {"ffn.combine is 'full_expert', but ffn.kind aoe ignores it"});
  // as an earlier version wrote them: every switch present, the ones the kind ignores at their defaults
  const ModelConfig dense = model_config_from_json(
      with("{\"kind\": \"dense\", \"score\": \"swiglu\", \"weights\": \"topk_softmax\", \"combine\": \"vse\", "
           "\"routing\": \"topk\"}"),
      "old.json");
  EXPECT_EQ(dense.ffn.kind, FfnKind::Dense);
  const ModelConfig uoe = model_config_from_json(
      with("{\"score\": \"gate_silu\", \"weights\": \"full_softmax\", \"combine\": \"full_expert\", \"routing\": "
           "\"topp\"}"),
      "uoe.json");
  EXPECT_EQ(uoe.ffn.score, ScoreSource::GateSilu);
  EXPECT_EQ(uoe.ffn.weights, ops::RouteWeights::FullSoftmax);
  EXPECT_EQ(uoe.ffn.combine, Combine::FullExpert);
  EXPECT_EQ(uoe.ffn.routing, Routing::TopP);
  const json::Value written = to_json(uoe).at("ffn");  // the same names back
  EXPECT_EQ(written.at("score").as_string(), "gate_silu");
  EXPECT_EQ(written.at("weights").as_string(), "full_softmax");
  EXPECT_EQ(written.at("combine").as_string(), "full_expert");
  EXPECT_EQ(written.at("routing").as_string(), "topp");
}

// Every size is bounded before a model is built: 10^9 layers were allocated one after another for minutes before
// memory ran out. The error names the file and the bound, and every preset is inside the bounds.
TEST(ConfigCounts, SizesBeyondTheBoundsAreRefusedBeforeAnythingIsBuilt) {
  const auto config = [](const std::string& field, const std::string& value) {
    return json::parse("{\"n_heads\": 4, \"" + field + "\": " + value + "}", "test");
  };
  expect_error([&] { model_config_from_json(config("n_layers", "1000000000"), "ckpt/config.json"); },
               {"[config] ckpt/config.json: n_layers is 1000000000, expected 1 to 1024"});
  expect_error([&] { model_config_from_json(config("vocab_size", "100000000"), "v.json"); },
               {"[config] v.json: vocab_size is 100000000, expected 1 to 16777216"});
  expect_error([&] { model_config_from_json(config("context", "0"), "c.json"); },
               {"[config] c.json: context is 0, expected 1 to 1048576"});
  expect_error([&] { model_config_from_json(config("d_model", "131072"), "d.json"); },
               {"[config] d.json: d_model is 131072, expected 2 to 65536"});
  // A value of the wrong type names the file as well as the key.
  expect_error([&] { model_config_from_json(config("n_layers", "\"12\""), "t.json"); },
               {"[config] t.json: [json] key \"n_layers\": expected an integer, got string"});
  // The model's constructor checks too: a vocabulary widened past the bound by a tokenizer is refused there.
  ModelConfig wide = load_model_config("tiny-uoe");
  wide.vocab_size = kMaxVocab + 1;
  expect_error([&] { LanguageModel m(wide); }, {"[config] the model 'tiny-uoe': vocab_size is 16777217"});
  for (const char* family : {"tiny", "small", "1b", "3b"})
    for (const char* kind : {"uoe", "moe", "aoe", "dense"}) {
      const ModelConfig c = load_model_config(std::string(family) + "-" + kind);
      check_model_config(c, c.name);
      EXPECT_EQ(model_config_from_json(to_json(c), c.name).n_layers, c.n_layers);
    }
}

}  // namespace
}  // namespace uoe::nn
