// Expert parallelism under mpirun: for every FFN kind, a layer whose experts are split across the ranks (EP = 2:
// each rank holds half of them), each rank on its half of a batch, equals the one-process layer (EP = 1) on the
// whole batch in the forward output and in every gradient: the expert slices' gradients, gathered, and the
// replicated parameters' gradients, summed over the ranks (data parallel).
#include <gtest/gtest.h>

#include "core/rng.h"
#include "dist_helpers.h"
#include "fixtures.h"
#include "nn/expert_parallel.h"
#include "nn/ffn.h"
#include "ops/ops.h"

namespace uoe::test {
namespace {

constexpr int64_t kTokens = 24;

struct Run {
  Tensor y, x_grad;
  nn::NamedTensors params;
};

// Forward of rows [begin, begin + count) of x through a fresh layer (same seed on every rank), backward of
// Σ y ⊙ probe. The input and the probe are float64, so the experts compute in float64.
Run run_layer(const nn::ModelConfig& c, Communicator* group, int64_t begin, int64_t count) {
  manual_seed(7);
  std::shared_ptr<nn::Ffn> ffn = nn::make_ffn(c, 0.02);
  const TensorOptions f64 = TensorOptions{}.with_dtype(DType::Float64);
  const Tensor x_all = randn({kTokens, c.d_model}, f64), probe = randn({kTokens, c.d_model}, f64);
  Tensor x = x_all.narrow(0, begin, count).contiguous();
  x.requires_grad_(true);
  if (group && ffn->experts()) ffn->shard_experts(*group);
  const Tensor y = ffn->forward(x).y;
  ops::sum(y * probe.narrow(0, begin, count)).backward();
  return {y.detach(), x.grad(), ffn->named_parameters()};
}

void expect_ep_equals_one_process(const nn::ModelConfig& c) {
  Communicator& comm = world();
  ASSERT_EQ(comm.size(), 2);
  const int64_t half = kTokens / 2, begin = comm.rank() * half;
  const Run ref = run_layer(c, nullptr, 0, kTokens);
  const Run ep = run_layer(c, &comm, begin, half);
  EXPECT_LT(max_rel_diff(ep.y, ref.y.narrow(0, begin, half)), 1e-6) << "forward output";
  EXPECT_LT(max_rel_diff(ep.x_grad, ref.x_grad.narrow(0, begin, half)), 1e-6) << "input gradient";
  ASSERT_EQ(ep.params.size(), ref.params.size());
  for (size_t i = 0; i < ep.params.size(); ++i) {
    const auto& [name, p] = ep.params[i];
    const Tensor g = p.grad().contiguous();
    const bool slice = p.size(0) * comm.size() == ref.params[i].second.size(0) && p.dim() == 3;
    Tensor whole = g;
    if (slice) {  // this rank's experts: gather every rank's rows
      Shape shape = g.shape();
      shape[0] *= comm.size();
      whole = empty(shape, TensorOptions{}.with_dtype(g.dtype()));
      comm.all_gather(g, whole);
    } else {
      comm.all_reduce(whole);  // data parallel: sum over the ranks
    }
    EXPECT_LT(max_rel_diff(whole, ref.params[i].second.grad()), 1e-5) << "gradient of " << name;
  }
}

TEST(ExpertParallel, DenseHasNoExpertsToShard) {
  std::shared_ptr<nn::Ffn> dense = nn::make_ffn(micro_config(nn::FfnKind::Dense), 0.02);
  EXPECT_THROW(dense->shard_experts(world()), Error);
  expect_ep_equals_one_process(micro_config(nn::FfnKind::Dense));  // unsharded: plain data parallel
}

TEST(ExpertParallel, EachRankKeepsItsShareOfTheExperts) {
  Communicator& comm = world();
  const nn::ModelConfig c = micro_config(nn::FfnKind::UoE);
  manual_seed(3);
  std::shared_ptr<nn::Ffn> full = nn::make_ffn(c, 0.02);
  manual_seed(3);
  std::shared_ptr<nn::Ffn> shard = nn::make_ffn(c, 0.02);
  shard->shard_experts(comm);
  const int64_t n_local = c.ffn.n_experts / comm.size();
  const nn::ExpertWeights &a = *full->experts(), &b = *shard->experts();
  EXPECT_EQ(b.gate.size(0), n_local);
  EXPECT_EQ(shard->num_parameters() * comm.size(), full->num_parameters());  // UoE: all its weights are experts
  EXPECT_LT(max_rel_diff(b.up, a.up.narrow(0, comm.rank() * n_local, n_local)), 1e-12);
  for (const Tensor* t : {&b.gate, &b.up, &b.down})  // the memory of the slice alone, not a view of the whole
    EXPECT_EQ(t->storage()->nbytes(), size_t(t->numel()) * t->itemsize());
  EXPECT_THROW(shard->shard_experts(comm), Error);  // once only
}

TEST(ExpertParallel, MoeEqualsOneProcess) { expect_ep_equals_one_process(micro_config(nn::FfnKind::MoE)); }

TEST(ExpertParallel, AoeEqualsOneProcess) { expect_ep_equals_one_process(micro_config(nn::FfnKind::AoE)); }

TEST(ExpertParallel, UoeEqualsOneProcess) {
  nn::ModelConfig c = micro_config(nn::FfnKind::UoE);
  expect_ep_equals_one_process(c);  // virtual shared expert, top-k
  c.ffn.combine = nn::Combine::FullExpert;
  expect_ep_equals_one_process(c);
  c.ffn.combine = nn::Combine::Vse;
  c.ffn.routing = nn::Routing::TopP;  // empty slots
  expect_ep_equals_one_process(c);
}

TEST(ExpertParallel, RankWithNoPairsJoinsTheExchanges) {
  // Every pair routed to experts 0 and 1 (rank 0's) or to no expert: rank 1 computes nothing. With AoE gate inputs.
  Communicator& comm = world();
  const int64_t T = 6, d = 5, dg = 3, D = 4, n = 4;
  const TensorOptions f64 = TensorOptions{}.with_dtype(DType::Float64);
  const std::vector<Tensor> values = {randn({T, d}, f64),     randn({T, 2}, f64),     randn({n, dg, D}, f64),
                            randn({n, d, D}, f64),  randn({n, D, d}, f64),  randn({T, n, dg}, f64)};
  comm.broadcast(values[0], 0);  // the same tokens on both ranks: the gradients of the experts add up over the ranks
  const Tensor indices = from_vector<int64_t>({0, 1, 1, -1, 0, 0, 1, 0, -1, -1, 1, 0}, {T, 2});
  const int64_t n_local = n / comm.size(), first = comm.rank() * n_local;
  const auto run = [&](Communicator* group) {
    std::vector<Tensor> in;  // fresh leaves; under expert parallelism this rank's slices of the expert weights
    for (size_t i = 0; i < values.size(); ++i) {
      const bool slice = group && i >= 2 && i <= 4;
      in.push_back((slice ? values[i].narrow(0, first, n_local) : values[i]).clone().requires_grad_(true));
    }
    const Tensor y = group ? nn::expert_parallel_ffn(*group, in[0], indices, in[1], in[2], in[3], in[4], 1, D, in[5])
                           : ops::expert_ffn(in[0], indices, in[1], in[2], in[3], in[4], 1, D, in[5]);
    ops::sum(y * y).backward();
    std::vector<Tensor> out = {y.detach()};
    for (const Tensor& t : in) out.push_back(t.grad().clone());
    return out;
  };
  std::vector<Tensor> ref = run(nullptr), ep = run(&comm);
  EXPECT_LT(max_rel_diff(ep[0], ref[0]), 1e-12) << "forward output";
  for (size_t i = 1; i < ep.size(); ++i) {
    if (i >= 3 && i <= 5)  // this rank's experts, with the gradient of both ranks' (identical) tokens
      ref[i] = ref[i].narrow(0, first, n_local) * double(comm.size());
    EXPECT_LT(max_rel_diff(ep[i], ref[i]), 1e-12) << "gradient of input " << i - 1;
  }
}

TEST(ExpertParallel, AllGatherRowsBackwardSumsEveryRanksGradientOfItsRows) {
  Communicator& comm = world();
  const int r = comm.rank(), P = comm.size();
  // rank r holds rows [[r], [10 + r]]; every rank gathers [[0], [10], [1], [11], ...]
  Tensor x = from_vector<double>({double(r), 10.0 + r}, {2, 1});
  x.requires_grad_(true);
  const Tensor y = nn::all_gather_rows(x, comm);
  ASSERT_EQ(y.size(0), 2 * P);
  std::vector<double> want;
  for (int j = 0; j < P; ++j) want.insert(want.end(), {double(j), 10.0 + j});
  EXPECT_EQ(y.to_vector<double>(), want);
  // rank j weighs gathered row i by (j + 1)(i + 1): rank r's row k collects Σ_j (j + 1)(2r + k + 1)
  ops::sum(y * (arange(1, double(2 * P + 1)).reshape({2 * P, 1}).to(DType::Float64) * double(r + 1))).backward();
  const double ranks = double(P * (P + 1) / 2);
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{ranks * (2 * r + 1), ranks * (2 * r + 2)}));
  // bfloat16: summed in float32, handed back in bfloat16
  Tensor b = full({2, 3}, 1.0 + r, TensorOptions{}.with_dtype(DType::BFloat16));
  b.requires_grad_(true);
  ops::sum(nn::all_gather_rows(b, comm)).backward();
  EXPECT_EQ(b.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(b.grad().to(DType::Float32).to_vector<float>(), std::vector<float>(6, float(P)));
}

TEST(ExpertParallel, AllToAllBackwardIsTheReverseExchange) {
  Communicator& comm = world();
  // rank r sends r + 1 rows to rank 0 and 2 rows to rank 1, each row holding (sender, row)
  const int r = comm.rank();
  const std::vector<int64_t> send = {r + 1, 2}, recv = r == 0 ? std::vector<int64_t>{1, 2} : std::vector<int64_t>{2, 2};
  Tensor x = arange(0, double(send[0] + send[1])).reshape({send[0] + send[1], 1}) + 10.0 * r;
  x.requires_grad_(true);
  const Tensor y = nn::all_to_all(x, comm, send, recv);
  ASSERT_EQ(y.size(0), recv[0] + recv[1]);
  // gradient of row i of y: 100 · (rank + 1) + i, which returns to the row of x it came from
  ops::sum(y * (arange(0, double(y.size(0))).reshape({y.size(0), 1}) + 100.0 * (r + 1))).backward();
  const std::vector<float> yv = y.to_vector<float>(), gx = x.grad().to_vector<float>();
  if (r == 0) {
    EXPECT_EQ(yv, (std::vector<float>{0, 10, 11}));
    EXPECT_EQ(gx, (std::vector<float>{100, 200, 201}));
  } else {
    EXPECT_EQ(yv, (std::vector<float>{1, 2, 12, 13}));
    EXPECT_EQ(gx, (std::vector<float>{101, 102, 202, 203}));
  }
}

}  // namespace
}  // namespace uoe::test
