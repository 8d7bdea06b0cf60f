// bfloat16 parameter storage: stochastic rounding is unbiased and keeps exact values, AdamW and SGD on bfloat16
// parameters (float32 state) follow the float32 optimisers, updates far below the bfloat16 spacing still add up,
// and training with bfloat16 parameters follows the float32 curve, checkpoints in bfloat16 and resumes exactly.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <fstream>

#include "core/json.h"
#include "core/rng.h"
#include "core/stochastic_round.h"
#include "fixtures.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"
#include "nn/tokenizer.h"
#include "nn/trainer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

uint32_t bits(float x) { return std::bit_cast<uint32_t>(x); }
float from_bf16(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

TEST(StochasticRounding, KeepsRepresentableValuesAndSpecials) {
  for (float x : {1.0f, -3.5f, 0.0f, -0.0f, 0x1p-100f, 65280.0f})
    for (uint32_t noise : {0u, 1u, 0x7fffu, 0xffffu, 0x12345678u})
      EXPECT_EQ(from_bf16(bf16_round_stochastic(bits(x), noise)), x) << x << " noise " << noise;
  EXPECT_TRUE(std::isinf(from_bf16(bf16_round_stochastic(bits(INFINITY), 0xffffu))));
  EXPECT_TRUE(std::isnan(from_bf16(bf16_round_stochastic(bits(NAN), 0xffffu))));
  EXPECT_TRUE(std::isnan(from_bf16(bf16_round_stochastic(bits(-NAN), 0u))));
}

TEST(StochasticRounding, RoundsUpWithTheProbabilityOfTheDroppedFraction) {
  // 1 + a quarter of the bfloat16 spacing (2^-7) rounds up in magnitude a quarter of the time, either sign.
  const float spacing = 1.0f / 128;
  for (float sign : {1.0f, -1.0f}) {
    const float x = sign * (1.0f + spacing / 4);
    int up = 0;
    const int trials = 20000;
    for (int i = 0; i < trials; ++i) {
      const float r = from_bf16(bf16_round_stochastic(bits(x), rounding_noise(uint64_t(i), 3, bits(x))));
      ASSERT_TRUE(r == sign * 1.0f || r == sign * (1.0f + spacing)) << r;
      up += r != sign * 1.0f;
    }
    EXPECT_NEAR(double(up) / trials, 0.25, 0.015) << "sign " << sign;
  }
}

TEST(Bf16Parameters, AdamWFollowsFloat32) {
  Generator gen(5);
  const Tensor start = randn({64, 48}, {}, &gen);
  Tensor p32 = start.clone(), p16 = start.to(DType::BFloat16);
  AdamW a32({{"w", p32}}, {0.9, 0.95, 1e-8, 0.1}), a16({{"w", p16}}, {0.9, 0.95, 1e-8, 0.1});
  const Tensor direction = randn({64, 48}, {}, &gen);  // a steady descent direction, so the weights travel
  for (int step = 0; step < 40; ++step) {
    const Tensor g = (direction + randn({64, 48}, {}, &gen) * 0.1).to(DType::BFloat16);  // the same values for both
    p32.set_grad(g.to(DType::Float32));
    p16.set_grad(g);
    a32.step(1e-2);
    a16.step(1e-2);
  }
  EXPECT_EQ(p16.dtype(), DType::BFloat16);
  const Tensor diff = p16.to(DType::Float32) - p32;
  // Each step's rounding errs by at most one bfloat16 spacing (2^-8 relative), unbiased: after 40 steps about
  // sqrt(40) / (2^8 sqrt(6)) = 1% of the weights, while the float32 run moved them by ~40 lr = 0.4 each.
  EXPECT_LT(std::sqrt(ops::sum(diff * diff).item<double>() / ops::sum(p32 * p32).item<double>()), 2e-2);
  const Tensor moved = p32 - start;
  EXPECT_LT(std::sqrt(ops::sum(diff * diff).item<double>() / ops::sum(moved * moved).item<double>()), 5e-2);
  for (const auto& [name, t] : a16.state())
    EXPECT_TRUE(name == "step" || t.dtype() == DType::Float32) << name;
}

TEST(Bf16Parameters, UpdatesBelowTheSpacingAddUpOnAverage) {
  // 200 SGD steps of 1e-4 on weights of 1.0 (bfloat16 spacing 2^-7 = 7.8e-3): round to nearest would never move
  // them; stochastic rounding moves their mean by 0.02, each weight a few grid points (2^-8 apart) down.
  const int64_t n = 8192;
  Tensor p = ones({n}, TensorOptions{}.with_dtype(DType::BFloat16));
  SGD sgd({{"w", p}}, 0.0, 0.0);
  for (int step = 0; step < 200; ++step) {
    p.set_grad(ones({n}, TensorOptions{}.with_dtype(DType::BFloat16)));
    sgd.step(1e-4);
  }
  const std::vector<float> w = p.to(DType::Float32).to_vector<float>();
  double mean = 0;
  for (float x : w) {
    EXPECT_GE(x, 0.94f);
    EXPECT_LE(x, 1.0f);
    mean += x / double(n);
  }
  EXPECT_NEAR(mean, 0.98, 1e-3);
}

TrainOptions micro_options(const std::string& out, int64_t steps, bool bf16) {
  TrainOptions o;
  o.steps = steps;
  o.batch = 4;
  o.seq = 32;
  o.lr = 3e-3;
  o.min_lr = 3e-3;  // constant: a run stopped early resumes onto the same schedule
  o.warmup = 0;
  o.eval_every = 0;
  o.eval_batches = 1;
  o.progress = false;
  o.out_dir = out;
  if (bf16) {
    o.param_dtype = DType::BFloat16;
    o.compute_dtype = DType::BFloat16;
  }
  return o;
}

std::vector<double> train_losses(const std::string& out) {
  std::vector<double> losses;
  std::ifstream in(out + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);) losses.push_back(json::parse(line, "metrics").at("train_loss").as_double());
  return losses;
}

TEST(Bf16Parameters, TrainingFollowsFloat32AndResumesExactly) {
  const std::string dir = test::temp_dir("bf16_params");
  const auto data = test::micro_data(dir);
  const auto tok = make_byte_tokenizer();
  const ModelConfig config = test::micro_config(FfnKind::UoE);
  train(config, micro_options(dir + "/f32", 12, false), *data, *tok);
  train(config, micro_options(dir + "/bf16", 12, true), *data, *tok);
  const std::vector<double> f32 = train_losses(dir + "/f32"), bf16 = train_losses(dir + "/bf16");
  ASSERT_EQ(f32.size(), 12u);
  ASSERT_EQ(bf16.size(), 12u);
  EXPECT_LT(bf16.back(), bf16.front() - 0.5);  // it learns
  for (size_t i = 0; i < 12; ++i) EXPECT_LT(std::fabs(bf16[i] - f32[i]) / f32[i], 0.03) << "step " << i + 1;

  // The checkpoint holds bfloat16 parameters and float32 optimiser state; a float32 model loads it.
  const Checkpoint c = load_checkpoint(dir + "/bf16/checkpoint");
  for (const auto& [name, t] : c.model) EXPECT_EQ(t.dtype(), DType::BFloat16) << name;
  for (const auto& [name, t] : c.optimizer)
    EXPECT_TRUE(name == "step" || t.dtype() == DType::Float32) << name;
  LanguageModel f32_model(c.config);
  f32_model.load_state_dict(c.model);
  for (const auto& [name, t] : f32_model.state_dict())  // every bfloat16 value exactly, in float32
    EXPECT_EQ(t.to_vector<float>(), c.model.at(name).to(DType::Float32).to_vector<float>()) << name;

  // 7 steps, then resumed to 12: the same losses as 12 straight (stochastic rounding needs no saved state).
  train(config, micro_options(dir + "/split", 7, true), *data, *tok);
  TrainOptions resume = micro_options(dir + "/split", 12, true);
  resume.resume = true;
  resume.allow_change = {"steps"};  // a constant learning rate: the schedule does not depend on --steps
  train(config, resume, *data, *tok);
  EXPECT_EQ(train_losses(dir + "/split"), bf16);
}

TEST(Bf16Parameters, OnlyFloat32OrBfloat16Storage) {
  const std::string dir = test::temp_dir("bf16_params_bad");
  const auto data = test::micro_data(dir);
  TrainOptions o = micro_options(dir + "/run", 1, false);
  o.param_dtype = DType::Float16;
  try {
    train(test::micro_config(FfnKind::Dense), o, *data, *make_byte_tokenizer());
    FAIL() << "float16 parameters were accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("float32 or bfloat16, not float16"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace uoe::nn
