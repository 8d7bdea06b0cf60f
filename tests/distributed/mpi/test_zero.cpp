// ZeRO-1 across the ranks of mpirun: sharded updates equal the plain optimiser's, the gathered state is whole,
// and state moves between rank counts (whole state in, whole state out).
#include <gtest/gtest.h>

#include "core/rng.h"
#include "dist_helpers.h"
#include "nn/zero_optimizer.h"

namespace uoe {
namespace {

std::unique_ptr<nn::Optimizer> adamw(const nn::NamedTensors& p) {
  return std::make_unique<nn::AdamW>(p, nn::AdamWOptions{0.9, 0.95, 1e-8, 0.1});
}

// The same pseudo-gradients on every rank (as after DataParallel), drawn from `step`.
void set_grads(nn::LanguageModel& model, int64_t step) {
  Generator gen{uint64_t(100 + step)};
  for (auto& [name, p] : model.named_parameters()) Tensor(p).set_grad(randn(p.shape(), {}, &gen));
}

void expect_close(const nn::NamedTensors& a, const nn::NamedTensors& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    EXPECT_EQ(a[i].second.shape(), b[i].second.shape()) << a[i].first;
    EXPECT_LE(test::max_rel_diff(a[i].second, b[i].second), tol) << a[i].first;
  }
}

TEST(Zero, ShardedStepsEqualThePlainOptimiserAndTheStateIsWhole) {
  auto sharded = test::micro_model(3), plain = test::micro_model(3);
  nn::ZeroOptimizer zero(sharded->named_parameters(), world(), adamw);
  auto reference = adamw(plain->named_parameters());
  for (int64_t step = 0; step < 3; ++step) {
    set_grads(*sharded, step);
    set_grads(*plain, step);
    zero.step(1e-2);
    reference->step(1e-2);
  }
  EXPECT_EQ(zero.steps(), 3);
  expect_close(sharded->named_parameters(), plain->named_parameters(), 1e-6);
  expect_close(zero.state(), reference->state(), 1e-6);
}

TEST(Zero, StateMovesBetweenRankCounts) {
  // Whole state from one process (the plain optimiser) into ZeRO at this rank count, a step on each, then
  // ZeRO's gathered state back into a plain optimiser: everything still agrees.
  auto sharded = test::micro_model(4), plain = test::micro_model(4);
  auto reference = adamw(plain->named_parameters());
  set_grads(*plain, 0);
  reference->step(1e-2);
  nn::ZeroOptimizer zero(sharded->named_parameters(), world(), adamw);
  sharded->load_state_dict(plain->state_dict());
  const nn::NamedTensors saved = reference->state();
  zero.load_state(std::map<std::string, Tensor>(saved.begin(), saved.end()));
  set_grads(*sharded, 1);
  set_grads(*plain, 1);
  zero.step(1e-2);
  reference->step(1e-2);
  expect_close(sharded->named_parameters(), plain->named_parameters(), 1e-6);
  const nn::NamedTensors gathered = zero.state();
  auto again = adamw(plain->named_parameters());
  again->load_state(std::map<std::string, Tensor>(gathered.begin(), gathered.end()));
  expect_close(again->state(), reference->state(), 1e-6);
}

}  // namespace
}  // namespace uoe
