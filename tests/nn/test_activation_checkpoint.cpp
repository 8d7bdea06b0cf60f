// Activation checkpointing: the same loss and the same gradients as the plain model (auxiliary losses
// included), for every FFN kind, with far less memory held between forward and backward.
#include <gtest/gtest.h>

#include "core/allocator.h"
#include "core/rng.h"
#include "fixtures.h"
#include "gradcheck.h"
#include "nn/activation_checkpoint.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

class ActivationCheckpoint : public ::testing::TestWithParam<FfnKind> {};

TEST_P(ActivationCheckpoint, SameLossAndGradientsAsThePlainModel) {
  ModelConfig config = test::micro_config(GetParam());
  config.ffn.aux_loss = 0.01;  // the auxiliary losses' gradients must pass through the checkpoint too
  config.ffn.z_loss = 0.001;
  const TensorOptions i64 = TensorOptions{}.with_dtype(DType::Int64);
  manual_seed(5);
  const Tensor ids = randint(0, 256, {3, 32}, i64), targets = randint(0, 256, {3, 32}, i64);
  manual_seed(2);
  LanguageModel model(config);
  model.to(DType::Float64);
  const double plain = model.loss(ids, targets).item<double>();
  model.loss(ids, targets).backward();
  std::map<std::string, Tensor> want;
  for (auto& [name, p] : model.named_parameters()) want[name] = p.grad();

  model.checkpoint_activations = true;
  model.zero_grad();
  const Tensor loss = model.loss(ids, targets);
  EXPECT_NEAR(loss.item<double>(), plain, 1e-12);
  loss.backward();
  for (auto& [name, p] : model.named_parameters()) {
    ASSERT_TRUE(p.grad().defined()) << name;
    EXPECT_LT(testing::max_abs_diff(p.grad(), want.at(name)), 1e-12) << name;
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, ActivationCheckpoint,
                         ::testing::Values(FfnKind::Dense, FfnKind::MoE, FfnKind::AoE, FfnKind::UoE),
                         [](const auto& info) { return std::string(ffn_kind_name(info.param)); });

TEST(ActivationCheckpointMemory, HoldsOnlyTheBlockInputsUntilBackward) {
  ModelConfig config = test::micro_config(FfnKind::UoE);
  config.n_layers = 4;
  const Tensor ids = randint(0, 256, {8, 32}, TensorOptions{}.with_dtype(DType::Int64));
  LanguageModel model(config);
  Allocator& cpu = allocator_for(Device::cpu());
  size_t held[2];
  for (int on = 0; on < 2; ++on) {
    model.checkpoint_activations = on;
    const size_t before = cpu.stats().allocated;
    const Tensor loss = model.loss(ids, ids);
    held[on] = cpu.stats().allocated - before;  // what the graph keeps alive for backward
    loss.backward();
  }
  EXPECT_LT(held[1] * 3, held[0]) << "plain " << held[0] << " bytes, checkpointed " << held[1];
}

TEST(ActivationCheckpointFunction, RefusesOutputsOfAnotherDtype) {
  const Tensor x = ones({3}, TensorOptions{}.with_requires_grad());
  testing::expect_error([&] { checkpoint([](const Tensor& t) { return std::vector<Tensor>{t.to(DType::Float64)}; }, x); },
                        {"[checkpoint]", "float64", "float32"});
}

}  // namespace
}  // namespace uoe::nn
