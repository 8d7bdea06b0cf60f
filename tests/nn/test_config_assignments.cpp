// `field=value` assignments to a model configuration (uoe train --set, uoe compare --set/--variant): read through
// the config.json parser, with refusals that name the valid fields.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "nn/config.h"

namespace uoe::nn {
namespace {

using uoe::testing::expect_error;

TEST(ConfigAssignments, SetFieldsOfTheModelAndOfItsFfn) {
  const ModelConfig c = with_assignments(load_model_config("tiny-uoe"),
                                         {"ffn.routing_neurons=32", "ffn.combine=full_expert", "ffn.top_p=0.7",
                                          "n_layers=2", "tied_embeddings=false", "name=ablation"},
                                         "--set");
  EXPECT_EQ(c.ffn.routing_neurons, 32);
  EXPECT_EQ(c.ffn.combine, Combine::FullExpert);
  EXPECT_DOUBLE_EQ(c.ffn.top_p, 0.7);
  EXPECT_EQ(c.n_layers, 2);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.name, "ablation");
  EXPECT_EQ(c.d_model, 256);  // the rest as the preset has it
  // later assignments win, and a kind switched in the same list decides which fields apply
  const ModelConfig moe = with_assignments(load_model_config("tiny-uoe"),
                                           {"ffn.kind=moe", "ffn.aux_loss=0.01", "ffn.aux_loss=0.02",
                                            "ffn.routing=topp"},
                                           "--set");
  EXPECT_EQ(moe.ffn.kind, FfnKind::MoE);
  EXPECT_DOUBLE_EQ(moe.ffn.aux_loss, 0.02);
  EXPECT_EQ(moe.ffn.routing, Routing::TopP);
}

TEST(ConfigAssignments, UnknownFieldsAreRefusedNamingTheValidOnes) {
  const ModelConfig base = load_model_config("tiny-uoe");
  expect_error([&] { with_assignments(base, {"ffn.routing_neuron=32"}, "--set"); },
               {"[config] --set: unknown field 'ffn.routing_neuron', expected one of kind, hidden, n_experts, top_k, "
                "expert_width, shared_width, routing_neurons, d_low, score, weights, combine, routing, top_p, "
                "aux_loss, z_loss"});
  expect_error([&] { with_assignments(base, {"layers=2"}, "--set"); },
               {"[config] --set: unknown field 'layers', expected one of name, vocab_size, d_model, n_layers"});
  expect_error([&] { with_assignments(base, {"ffn.routing_neurons"}, "--set"); },
               {"[config] --set: 'ffn.routing_neurons' is not field=value"});
  expect_error([&] { with_assignments(base, {"ffn={}"}, "--set"); }, {"ffn.<field>=value"});
}

TEST(ConfigAssignments, FieldsTheKindIgnoresAreRefusedNamingThoseItUses) {
  const ModelConfig moe = load_model_config("tiny-moe");
  expect_error([&] { with_assignments(moe, {"ffn.routing_neurons=32"}, "--set"); },
               {"[config] --set: ffn.routing_neurons is ignored by ffn.kind moe (only uoe use it); ffn.kind moe uses "
                "kind, n_experts, top_k, expert_width, shared_width, routing, top_p, aux_loss, z_loss"});
  expect_error([&] { with_assignments(load_model_config("tiny-dense"), {"ffn.aux_loss=0.01"}, "--set"); },
               {"ffn.aux_loss is ignored by ffn.kind dense (only moe, aoe, uoe use it); ffn.kind dense uses kind, "
                "hidden"});
  // a switch's value is checked by the config parser: the names it accepts
  expect_error([&] { with_assignments(load_model_config("tiny-uoe"), {"ffn.combine=B"}, "--set"); },
               {"[config] --set: ffn.combine is 'B', expected one of vse, full_expert"});
}

TEST(ConfigAssignments, ValuesAreCheckedAsInConfigJson) {
  const ModelConfig base = load_model_config("tiny-uoe");
  expect_error([&] { with_assignments(base, {"ffn.routing_neurons=many"}, "--set"); },
               {"[config] --set:", "routing_neurons", "expected"});
  expect_error([&] { with_assignments(base, {"ffn.top_p=1.5"}, "--set"); },
               {"[config] --set: ffn.top_p is 1.5, expected (0, 1]"});
  expect_error([&] { with_assignments(base, {"ffn.routing_neurons=512"}, "--set"); },
               {"ffn.routing_neurons", "is 512, expected 0 to 511"});
}

}  // namespace
}  // namespace uoe::nn
