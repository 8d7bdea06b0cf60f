// Data parallel across the ranks of mpirun: the averaged gradients and the global loss equal one process's on the
// combined batch (to float32 rounding), with several buckets, gradient accumulation and uneven row shares.
#include <gtest/gtest.h>

#include "dist_helpers.h"
#include "fixtures.h"
#include "nn/data_parallel.h"
#include "ops/ops.h"

namespace uoe {
namespace {

using nn::Batch;

struct Reference {
  double loss = 0;
  std::map<std::string, Tensor> grads;
};

// One process: the whole batch (or micro-batches, accumulated) on one model.
Reference combined(const std::vector<Batch>& micro, int64_t rows) {
  auto model = test::micro_model(1);
  Reference ref;
  for (const Batch& b : micro) ref.loss += test::backward_on_rows(*model, b, 0, rows, 1.0 / double(micro.size())) / double(micro.size());
  for (const auto& [name, p] : model->named_parameters()) ref.grads[name] = p.grad().clone();
  return ref;
}

// Every rank: its rows of the same batches, gradients averaged by DataParallel; returns the global mean loss.
double data_parallel(nn::LanguageModel& model, const std::vector<Batch>& micro, int64_t rows, int64_t bucket_bytes,
                     int64_t* buckets) {
  Communicator& comm = world();
  const nn::RowRange mine = nn::rank_rows(rows, comm.rank(), comm.size());
  const double share = double(mine.count) / double(rows);
  nn::DataParallel dp(model.named_parameters(), comm, share, bucket_bytes);
  *buckets = dp.bucket_count();
  double loss = 0;
  for (size_t i = 0; i < micro.size(); ++i) {
    if (i + 1 == micro.size()) dp.reduce_next_backward();
    loss += test::backward_on_rows(model, micro[i], mine.begin, mine.count, 1.0 / double(micro.size())) /
            double(micro.size());
  }
  dp.finish();
  const Tensor global = from_vector<double>({loss * share}, {1});
  comm.all_reduce(global);
  return global.item<double>();
}

void expect_same_as_combined(int64_t rows, int64_t micro_batches, int64_t bucket_bytes) {
  const std::string dir = test::shared_dir("dp");
  if (world().rank() == 0) test::micro_data(dir);
  world().barrier();
  const nn::TokenDataset data(std::make_shared<nn::TokenFile>(dir + "/tokens.bin"));
  std::vector<Batch> micro;
  for (int64_t i = 0; i < micro_batches; ++i) micro.push_back(data.train_batch(7, uint64_t(i), rows, 16));

  const Reference ref = combined(micro, rows);
  auto model = test::micro_model(1);
  int64_t buckets = 0;
  const double loss = data_parallel(*model, micro, rows, bucket_bytes, &buckets);
  EXPECT_NEAR(loss, ref.loss, 1e-5 * ref.loss);
  if (bucket_bytes < 4096) {
    EXPECT_GT(buckets, 3);
  }
  for (const auto& [name, p] : model->named_parameters()) EXPECT_LT(test::max_rel_diff(p.grad(), ref.grads.at(name)), 2e-5) << name;
}

TEST(DataParallel, GradientsEqualOneProcessOnTheCombinedBatch) { expect_same_as_combined(4, 1, 1024); }

TEST(DataParallel, WithGradientAccumulationAndOneBucket) { expect_same_as_combined(4, 2, int64_t(1) << 30); }

TEST(DataParallel, WithUnevenRowShares) { expect_same_as_combined(5, 1, 1024); }

// a: a gradient on rank 0 only; b: on every rank; c: on none, so it keeps no gradient (the optimiser skips it, as
// in one process, instead of decaying it with a zero gradient).
TEST(DataParallel, AGradientFromSomeRanksIsAveragedAndOneFromNoneStaysUndefined) {
  const auto param = [] { return ones({3}, TensorOptions{}.with_requires_grad(true)); };
  Tensor a = param(), b = param(), c = param();
  const double weight = 1.0 / world().size();
  nn::DataParallel dp({{"a", a}, {"b", b}, {"c", c}}, world(), weight, 1 << 20);
  for (int step = 0; step < 2; ++step) {  // the flags are reset between steps
    for (Tensor* p : {&a, &b, &c}) p->set_grad(Tensor());
    dp.reduce_next_backward();
    ops::sum(b * 3.0 + (world().rank() == 0 ? a * 2.0 : b * 0.0)).backward();
    dp.finish();
    ASSERT_TRUE(a.grad().defined());
    EXPECT_EQ(a.grad().to_vector<float>(), std::vector<float>(3, float(2.0 * weight)));
    EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(3, 3.0f));
    EXPECT_FALSE(c.grad().defined()) << "no rank gave c a gradient";
  }
}

TEST(DataParallel, StartsFromRankZerosParameters) {
  auto model = test::micro_model(uint64_t(world().rank()));  // a different initialisation on every rank
  auto rank0 = test::micro_model(0);
  nn::DataParallel dp(model->named_parameters(), world(), 0.5);
  for (const auto& [name, p] : model->named_parameters())
    EXPECT_EQ(p.to_vector<float>(), rank0->state_dict().at(name).to_vector<float>()) << name;
}

}  // namespace
}  // namespace uoe
