// Data parallel and ZeRO-1 in one process (LocalCommunicator): rank row shares, bucketed gradients equal to plain
// backward, misuse errors, and ZeRO's state under the wrapped optimiser's names and shapes.
#include <gtest/gtest.h>

#include "core/error.h"
#include "core/rng.h"
#include "fixtures.h"
#include "forwarding_communicator.h"
#include "nn/data_parallel.h"
#include "nn/transformer.h"
#include "nn/zero_optimizer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

std::unique_ptr<LanguageModel> model(uint64_t seed) {
  manual_seed(seed);
  return std::make_unique<LanguageModel>(test::micro_config(FfnKind::UoE));
}

void backward(LanguageModel& m, const Batch& b, double scale) { (m.loss(b.x, b.y) * scale).backward(); }

TEST(DataParallelLocal, RankRowsSplitTheBatchInOrder) {
  EXPECT_EQ(rank_rows(10, 0, 3).begin, 0);
  EXPECT_EQ(rank_rows(10, 0, 3).count, 3);
  EXPECT_EQ(rank_rows(10, 1, 3).begin, 3);
  EXPECT_EQ(rank_rows(10, 1, 3).count, 3);
  EXPECT_EQ(rank_rows(10, 2, 3).begin, 6);
  EXPECT_EQ(rank_rows(10, 2, 3).count, 4);
  EXPECT_EQ(rank_rows(4, 0, 1).count, 4);
}

TEST(DataParallelLocal, BucketedGradientsEqualPlainBackward) {
  const std::string dir = test::temp_dir("dp_local");
  auto data = test::micro_data(dir);
  const Batch b0 = data->train_batch(1, 0, 3, 16), b1 = data->train_batch(1, 1, 3, 16);
  auto plain = model(5), parallel = model(5);
  backward(*plain, b0, 0.5);
  backward(*plain, b1, 0.5);
  LocalCommunicator one;
  DataParallel dp(parallel->named_parameters(), one, 1.0, 2048);
  EXPECT_GT(dp.bucket_count(), 3);
  backward(*parallel, b0, 0.5);  // accumulates locally
  dp.reduce_next_backward();
  backward(*parallel, b1, 0.5);
  dp.finish();
  for (const auto& [name, p] : parallel->named_parameters())
    EXPECT_EQ(p.grad().to_vector<float>(), plain->state_dict().at(name).grad().to_vector<float>()) << name;
}

TEST(DataParallelLocal, AParameterWithoutAGradientInTheLastMicroBatchKeepsTheEarlierOnes) {
  const Tensor a = ones({3}, TensorOptions{}.with_requires_grad(true)),
               b = ones({3}, TensorOptions{}.with_requires_grad(true));
  LocalCommunicator one;
  DataParallel dp({{"a", a}, {"b", b}}, one, 1.0, 1 << 20);
  ops::sum(a * 2.0 + b * 3.0).backward();  // micro-batch 1: both
  dp.reduce_next_backward();
  ops::sum(a * 5.0).backward();  // micro-batch 2: a alone
  dp.finish();
  EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(3, 7.0f));
  EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(3, 3.0f)) << "b's first micro-batch was dropped";
}

TEST(DataParallelLocal, AParameterWithoutAGradientKeepsNone) {
  const Tensor a = ones({3}, TensorOptions{}.with_requires_grad(true)),
               b = ones({3}, TensorOptions{}.with_requires_grad(true));
  LocalCommunicator one;
  DataParallel dp({{"a", a}, {"b", b}}, one, 1.0, 1 << 20);
  dp.reduce_next_backward();
  ops::sum(a * 5.0).backward();
  dp.finish();
  EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(3, 5.0f));
  EXPECT_FALSE(b.grad().defined()) << "b had no gradient; it was given zeros, which AdamW would still apply";
}

// A LocalCommunicator that counts the all-reduces started.
class CountingCommunicator final : public test::ForwardingCommunicator {
 public:
  int started = 0;
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    ++started;
    return ForwardingCommunicator::all_reduce_async(t, op);
  }
};

TEST(DataParallelLocal, BucketsStartWhileBackwardIsStillRunning) {
  const std::string dir = test::temp_dir("dp_overlap");
  auto data = test::micro_data(dir);
  auto m = model(1);
  CountingCommunicator comm;
  DataParallel dp(m->named_parameters(), comm, 1.0, 2048);
  int started_at_first_block = -1;  // when the gradients of block 0 (late in backward) arrive
  m->blocks[0]->attn_norm->weight.register_hook([&](const Tensor&) {
    started_at_first_block = comm.started;
    return Tensor();
  });
  dp.reduce_next_backward();
  backward(*m, data->train_batch(1, 0, 2, 16), 1.0);
  EXPECT_GT(started_at_first_block, 0);
  EXPECT_LT(started_at_first_block, dp.bucket_count());
  dp.finish();
  EXPECT_EQ(comm.started, dp.bucket_count());
}

TEST(DataParallelLocal, MisuseIsAnError) {
  auto m = model(0);
  LocalCommunicator one;
  DataParallel dp(m->named_parameters(), one, 1.0);
  EXPECT_THROW(dp.finish(), Error);
  dp.reduce_next_backward();
  EXPECT_THROW(dp.reduce_next_backward(), Error);
  dp.finish();  // no backward ran: no parameter has a gradient
  for (const auto& [name, p] : m->named_parameters()) EXPECT_FALSE(p.grad().defined()) << name;
}

TEST(ZeroLocal, OneRankEqualsTheWrappedOptimiserWithTheSameState) {
  auto a = model(2), b = model(2);
  LocalCommunicator one;
  auto sgd = [](const NamedTensors& p) { return std::make_unique<SGD>(p, 0.9, 0.1); };
  ZeroOptimizer zero(a->named_parameters(), one, sgd);
  auto plain = sgd(b->named_parameters());
  for (int step = 0; step < 2; ++step) {
    Generator ga{uint64_t(step)}, gb{uint64_t(step)};
    for (auto& [name, p] : a->named_parameters()) Tensor(p).set_grad(randn(p.shape(), {}, &ga));
    for (auto& [name, p] : b->named_parameters()) Tensor(p).set_grad(randn(p.shape(), {}, &gb));
    zero.step(0.1);
    plain->step(0.1);
  }
  for (const auto& [name, p] : a->named_parameters())
    EXPECT_EQ(p.to_vector<float>(), b->state_dict().at(name).to_vector<float>()) << name;
  const NamedTensors zs = zero.state(), ps = plain->state();
  ASSERT_EQ(zs.size(), ps.size());
  for (size_t i = 0; i < zs.size(); ++i) {
    EXPECT_EQ(zs[i].first, ps[i].first);
    EXPECT_EQ(zs[i].second.to(DType::Float64).to_vector<double>(), ps[i].second.to(DType::Float64).to_vector<double>())
        << zs[i].first;
  }
  std::map<std::string, Tensor> missing(ps.begin(), ps.end());
  missing.erase(ps.front().first);
  EXPECT_THROW(zero.load_state(missing), Error);
}

}  // namespace
}  // namespace uoe::nn
