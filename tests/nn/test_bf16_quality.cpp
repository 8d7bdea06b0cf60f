// bfloat16 training quality on the CPU: tiny-uoe trained 300 steps in float32 and with --dtype bf16 (bfloat16
// compute over float32 master weights) from the same seed on the same data ends at validation losses within
// 0.03 nats. Kept cheap for CI (batch 4 x 64): the comparison, not the absolute loss, is what it checks.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>

#include "fixtures.h"
#include "nn/config.h"
#include "nn/dataset.h"
#include "nn/tokenizer.h"
#include "nn/trainer.h"
#include "one_thread.h"

namespace uoe::nn {
namespace {

// TinyShakespeare (../shared/data beside the repository), else the fixtures' synthetic text.
std::shared_ptr<TokenDataset> training_data(const std::string& dir) {
  const std::filesystem::path corpus =
      (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / ".." / "shared" / "data" / "tinyshakespeare.txt")
          .lexically_normal();
  if (!std::filesystem::exists(corpus)) return test::micro_data(dir);
  auto tok = make_byte_tokenizer();
  prepare_tokens(corpus.string(), *tok, dir + "/tokens.bin");
  return std::make_shared<TokenDataset>(std::make_shared<TokenFile>(dir + "/tokens.bin"));
}

double final_val_loss(const TokenDataset& data, const std::string& out, std::optional<DType> compute) {
  TrainOptions o;
  o.steps = 300;
  o.batch = 4;
  o.seq = 64;
  // At 3e-3 the runs were unstable enough that bf16 and f32 ended apart by whatever their trajectories drifted:
  // bf16 minus f32 over seeds 0-3 read -0.017, +0.006, -0.010, -0.043 nats on avx512_bf16 and +0.037, +0.020,
  // +0.028, -0.051 on the float32 kernels (Zen 5, 2026-12-07). At 1e-3 both train further (2.11-2.13 against
  // 2.25-2.36 nats) and agree: +0.009, -0.012 (avx512_bf16) and +0.007, +0.009, -0.002, -0.001 (float32 kernels).
  o.lr = 1e-3;
  o.eval_every = 0;
  o.eval_batches = 64;  // the difference measured 0.033 nats at 16 batches, 0.017 at 64, 0.015 at 200
  o.progress = false;
  o.save_at_end = false;
  o.out_dir = out;
  o.compute_dtype = compute;
  auto tok = make_byte_tokenizer();
  return train(load_model_config("tiny-uoe"), o, data, *tok).final_val_loss;
}

TEST(Bf16Quality, TinyUoeValidationLossMatchesFloat32Within003Nats) {
  const test::OneThread one_thread;  // beside another test under ctest -j2: no workers spinning for its core
  const std::string dir = test::temp_dir("bf16_quality");
  const auto data = training_data(dir);
  const double f32 = final_val_loss(*data, dir + "/f32", std::nullopt);
  const double bf16 = final_val_loss(*data, dir + "/bf16", DType::BFloat16);
  std::cout << "[ tiny-uoe 300 steps: validation loss f32 " << f32 << ", bf16 " << bf16 << " nats ]\n";
  EXPECT_TRUE(std::isfinite(f32) && std::isfinite(bf16));
  EXPECT_LT(f32, 3.0) << "the float32 run did not learn, so the comparison says nothing";
  EXPECT_NEAR(bf16, f32, 0.03);
}

}  // namespace
}  // namespace uoe::nn
