// NCCL across emulated GPUs (the NCCL stand-in; ranks are threads, thread_ranks.h): every collective of the NCCL
// communicator against its definition computed on the CPU, groups made by split, data and expert parallelism (on two
// GPUs, and expert groups with replicas on four) against the same layer on one GPU; and the stand-in itself: it
// checks what NCCL checks, and what NCCL would hang on or corrupt memory with fails the test.
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>
#include <nccl.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <mutex>
#include <thread>

#include "core/rng.h"
#include "fixtures.h"
#include "gradcheck.h"
#include "nn/data_parallel.h"
#include "nn/ffn.h"
#include "ops/ops.h"
#include "thread_ranks.h"

namespace uoe {
namespace {

// t on cuda:device, written there by a kernel queued on the current stream (the copy alone waits for itself): a
// collective must wait for it.
Tensor on(const Tensor& t, int device) { return t.contiguous().to(Device::cuda(device)) * 1.0; }
template <class T = float>
std::vector<T> host(const Tensor& t) {
  return t.to(Device::cpu()).contiguous().to_vector<T>();
}

std::vector<float> elementwise_max(const Tensor& a, const Tensor& b) {
  std::vector<float> x = host(a);
  const std::vector<float> y = host(b);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::max(x[i], y[i]);
  return x;
}

TEST(NcclRanks, EveryCollectiveOnTwoGpusIsItsDefinition) {
  // Both ranks' inputs, made here: the global generator is not for threads.
  const std::vector<Tensor> a = {randn({1000}), randn({1000})};
  const std::vector<Tensor> b = {randn({257}).to(DType::BFloat16), randn({257}).to(DType::BFloat16)};
  const std::vector<Tensor> n = {from_vector<int64_t>({1, -2, 3}, {3}),
                                 from_vector<int64_t>({int64_t(1) << 40, 5, -7}, {3})};
  const std::vector<Tensor> s = {randn({6, 4}), randn({6, 4})};  // reduce_scatter: 3 rows to each rank
  const std::vector<int64_t> rows = {2, 3}, at = {0, 2};          // all_gather: uneven
  const std::vector<Tensor> g = {randn({2, 5}), randn({3, 5})};
  const std::vector<std::vector<int64_t>> send = {{1, 3}, {2, 0}}, recv = {{1, 2}, {3, 0}};  // all_to_all
  const std::vector<Tensor> m = {randn({4, 3}), randn({2, 3})};
  const std::vector<Tensor> received = {ops::cat({m[0].narrow(0, 0, 1), m[1]}), m[0].narrow(0, 1, 3)};
  test::run_ranks(2, [&](Communicator& c) {
    const int r = c.rank();
    const Tensor sum = on(a[size_t(r)], r), max = on(a[size_t(r)], r), bf16 = on(b[size_t(r)], r),
                 ints = on(n[size_t(r)], r);
    c.all_reduce(sum);
    c.all_reduce(max, ReduceOp::Max);
    c.all_reduce(bf16);
    c.all_reduce(ints);
    EXPECT_EQ(host(sum), host(a[0] + a[1])) << "all_reduce";
    EXPECT_EQ(host(max), elementwise_max(a[0], a[1])) << "all_reduce max";
    const Tensor bf16_sum = (b[0].to(DType::Float32) + b[1].to(DType::Float32)).to(DType::BFloat16);  // one rounding
    EXPECT_EQ(host(bf16.to(DType::Float32)), host(bf16_sum.to(DType::Float32))) << "all_reduce bfloat16";
    EXPECT_EQ(host<int64_t>(ints), (std::vector<int64_t>{1 + (int64_t(1) << 40), 3, -4})) << "all_reduce int64";

    const Tensor scattered = on(zeros({3, 4}), r);
    c.reduce_scatter(on(s[size_t(r)], r), scattered);
    EXPECT_EQ(host(scattered), host((s[0] + s[1]).narrow(0, 3 * r, 3))) << "reduce_scatter";

    const std::vector<float> gathered_want = host(ops::cat(g));
    const Tensor gathered = on(zeros({5, 5}), r), in_place = on(zeros({5, 5}), r);
    c.all_gather(on(g[size_t(r)], r), gathered, rows);
    EXPECT_EQ(host(gathered), gathered_want) << "all_gather";
    in_place.narrow(0, at[size_t(r)], rows[size_t(r)]).copy_(on(g[size_t(r)], r));
    c.all_gather(in_place.narrow(0, at[size_t(r)], rows[size_t(r)]), in_place, rows);
    EXPECT_EQ(host(in_place), gathered_want) << "all_gather in place";

    const Tensor exchanged = on(zeros({3, 3}), r);
    c.all_to_all(on(m[size_t(r)], r), send[size_t(r)], exchanged, recv[size_t(r)]);
    EXPECT_EQ(host(exchanged), host(received[size_t(r)])) << "all_to_all";

    const Tensor root = on(a[size_t(r)], r);
    c.broadcast(root, 1);
    EXPECT_EQ(host(root), host(a[1])) << "broadcast";

    const Tensor async = on(a[size_t(r)], r);
    c.all_reduce_async(async)->wait();
    EXPECT_EQ(host(async * 2.0), host((a[0] + a[1]) * 2.0)) << "all_reduce_async";
  });
}

TEST(NcclRanks, SplitMakesGroupsRankedByKeyEachWithItsNccl) {
  test::run_ranks(2, [](Communicator& c) {
    const int r = c.rank();
    const std::unique_ptr<Communicator> reversed = c.split(0, -r), alone = c.split(r, 0);
    EXPECT_EQ(reversed->rank(), 1 - r);
    const Tensor gathered = on(zeros({2}), r);
    reversed->all_gather(on(full({1}, r), r), gathered);
    EXPECT_EQ(host(gathered), (std::vector<float>{1, 0}));
    EXPECT_EQ(alone->size(), 1);
    const Tensor kept = on(full({3}, r + 1), r);
    alone->all_reduce(kept);
    EXPECT_EQ(host(kept), std::vector<float>(3, float(r + 1)));
  });
}

// A fresh layer of `c` on cuda:device, its initial weights drawn from `seed` (by the global generator: one rank at a
// time), holding `group`'s share of the experts when there is a group.
std::shared_ptr<nn::Ffn> fresh_layer(const nn::ModelConfig& c, int device, Communicator* group, uint64_t seed = 7) {
  static std::mutex made;
  std::shared_ptr<nn::Ffn> ffn;
  {
    std::lock_guard<std::mutex> lock(made);
    manual_seed(seed);
    ffn = nn::make_ffn(c, 0.02);
  }
  if (group) ffn->shard_experts(*group);
  ffn->to(Device::cuda(device));
  return ffn;
}

// The gradients of `ffn`'s parameters, on the CPU.
std::vector<Tensor> gradients(const nn::Ffn& ffn) {
  std::vector<Tensor> grads;
  for (const auto& [name, p] : ffn.named_parameters()) grads.push_back(p.grad().to(Device::cpu()));
  return grads;
}

// As tests/distributed/mpi/test_expert_parallel.cpp, on GPUs: each rank holds half of the experts and half of the
// tokens; forward output, input gradient and every parameter gradient equal the one-GPU layer's on all tokens.
void expect_two_gpus_equal_one(const nn::ModelConfig& c) {
  constexpr int64_t kTokens = 24, kHalf = kTokens / 2;
  const Tensor x_all = randn({kTokens, c.d_model}), probe = randn({kTokens, c.d_model});
  const auto run = [&](Communicator* group, int device, int64_t begin, int64_t count) {
    std::shared_ptr<nn::Ffn> ffn = fresh_layer(c, device, group);
    Tensor x = on(x_all.narrow(0, begin, count), device);
    x.requires_grad_(true);
    const Tensor y = ffn->forward(x).y;
    ops::sum(y * on(probe.narrow(0, begin, count), device)).backward();
    return std::make_tuple(y.detach(), x.grad(), ffn);
  };
  // The reference on the CPU: a rank reading cuda:0 would wait for rank 0's GPU (another process's, in a real run).
  const auto [y_gpu, x_grad_gpu, ref] = run(nullptr, 0, 0, kTokens);
  const Tensor y_ref = y_gpu.to(Device::cpu()), x_grad_ref = x_grad_gpu.to(Device::cpu());
  const std::vector<Tensor> grads_ref = gradients(*ref);
  test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    const auto [y, x_grad, ep] = run(&comm, r, r * kHalf, kHalf);
    EXPECT_LT(testing::max_abs_diff(y.to(Device::cpu()), y_ref.narrow(0, r * kHalf, kHalf)), 1e-6);
    EXPECT_LT(testing::max_abs_diff(x_grad.to(Device::cpu()), x_grad_ref.narrow(0, r * kHalf, kHalf)), 1e-6);
    const nn::NamedTensors mine = ep->named_parameters();
    ASSERT_EQ(mine.size(), grads_ref.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      const Tensor g = mine[i].second.grad().contiguous(), want = grads_ref[i];
      Tensor expected = want;
      if (g.size(0) * 2 == want.size(0) && g.dim() == 3)  // this rank's experts
        expected = want.narrow(0, r * g.size(0), g.size(0));
      else
        comm.all_reduce(g);  // replicated: the two halves' gradients add up
      EXPECT_LT(testing::max_abs_diff(g.to(Device::cpu()), expected), 1e-5) << "gradient of " << mine[i].first;
    }
  });
}

// As FourRanks.ExpertGroupsOfTwoWithReplicasFollowOneProcess (tests/distributed/mpi), on four GPUs: the experts
// split over groups of two ranks ({0, 1} and {2, 3}), each half of them replicated in two groups ({0, 2}, {1, 3});
// each rank a quarter of the tokens. Collectives of three communicators share each GPU's communication stream, in
// the order each rank issues them.
TEST(NcclRanks, ExpertGroupsOfTwoWithReplicasOnFourGpusEqualOneGpu) {
  const nn::ModelConfig c = test::micro_config(nn::FfnKind::UoE);
  constexpr int64_t kTokens = 24, kQuarter = kTokens / 4;
  const Tensor x_all = randn({kTokens, c.d_model}), probe = randn({kTokens, c.d_model});
  const std::shared_ptr<nn::Ffn> whole = fresh_layer(c, 0, nullptr);
  Tensor x_whole = on(x_all, 0);
  x_whole.requires_grad_(true);
  const Tensor y_whole = whole->forward(x_whole).y;
  ops::sum(y_whole * on(probe, 0)).backward();
  const Tensor y_ref = y_whole.detach().to(Device::cpu()), x_grad_ref = x_whole.grad().to(Device::cpu());
  const std::vector<Tensor> grads_ref = gradients(*whole);
  test::run_ranks(4, [&](Communicator& world) {
    const int r = world.rank();
    const std::unique_ptr<Communicator> experts = world.split(r / 2, r), replicas = world.split(r % 2, r);
    const std::shared_ptr<nn::Ffn> ffn = fresh_layer(c, r, experts.get());
    Tensor x = on(x_all.narrow(0, r * kQuarter, kQuarter), r);
    x.requires_grad_(true);
    const Tensor y = ffn->forward(x).y;
    ops::sum(y * on(probe.narrow(0, r * kQuarter, kQuarter), r)).backward();
    EXPECT_LT(testing::max_abs_diff(y.to(Device::cpu()), y_ref.narrow(0, r * kQuarter, kQuarter)), 1e-6);
    EXPECT_LT(testing::max_abs_diff(x.grad().to(Device::cpu()), x_grad_ref.narrow(0, r * kQuarter, kQuarter)), 1e-6);
    const nn::NamedTensors mine = ffn->named_parameters();
    ASSERT_EQ(mine.size(), grads_ref.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      const Tensor g = mine[i].second.grad().contiguous();
      Tensor expected = grads_ref[i];
      if (g.dim() == 3 && g.size(0) * 2 == expected.size(0)) {  // this expert group's half: the replica adds its tokens
        replicas->all_reduce(g);
        expected = expected.narrow(0, experts->rank() * g.size(0), g.size(0));
      } else {
        world.all_reduce(g);
      }
      EXPECT_LT(testing::max_abs_diff(g.to(Device::cpu()), expected), 1e-5) << "gradient of " << mine[i].first;
    }
  });
}

TEST(NcclRanks, ExpertParallelFfnOnTwoGpusEqualsOneGpu) {
  for (nn::FfnKind kind : {nn::FfnKind::MoE, nn::FfnKind::AoE, nn::FfnKind::UoE}) {
    SCOPED_TRACE(int(kind));
    expect_two_gpus_equal_one(test::micro_config(kind));
  }
}

// As tests/distributed/mpi/test_data_parallel.cpp, on GPUs: each rank's share of the tokens (uneven), gradients
// averaged by DataParallel in several buckets whose non-blocking all-reduces start during backward, equal one GPU's
// on all tokens (of the mean loss); DataParallel starts every rank from rank 0's weights (a broadcast).
TEST(NcclRanks, DataParallelOnTwoGpusEqualsOneGpuOnTheWholeBatch) {
  const nn::ModelConfig c = test::micro_config(nn::FfnKind::UoE);
  constexpr int64_t kTokens = 25;
  const Tensor x_all = randn({kTokens, c.d_model}), probe = randn({kTokens, c.d_model});
  const auto mean_loss_backward = [&](nn::Ffn& ffn, int device, nn::RowRange rows) {
    const Tensor y = ffn.forward(on(x_all.narrow(0, rows.begin, rows.count), device)).y;
    (ops::sum(y * on(probe.narrow(0, rows.begin, rows.count), device)) * (1.0 / double(rows.count))).backward();
  };
  const std::shared_ptr<nn::Ffn> whole = fresh_layer(c, 0, nullptr);
  mean_loss_backward(*whole, 0, {0, kTokens});
  const std::vector<Tensor> grads_ref = gradients(*whole);
  test::run_ranks(2, [&](Communicator& comm) {
    const int r = comm.rank();
    const nn::RowRange mine = nn::rank_rows(kTokens, r, comm.size());
    const std::shared_ptr<nn::Ffn> ffn = fresh_layer(c, r, nullptr, 7 + r);  // rank 1's weights are replaced
    nn::DataParallel dp(ffn->named_parameters(), comm, double(mine.count) / kTokens, 1024);
    EXPECT_GT(dp.bucket_count(), 2);
    dp.reduce_next_backward();
    mean_loss_backward(*ffn, r, mine);
    dp.finish();
    const std::vector<Tensor> grads = gradients(*ffn);
    ASSERT_EQ(grads.size(), grads_ref.size());
    for (size_t i = 0; i < grads.size(); ++i) EXPECT_LT(testing::max_abs_diff(grads[i], grads_ref[i]), 1e-6) << i;
  });
}

// ---- the stand-in ----

// Two ranks on cuda:0 and cuda:1 run `issue` (given its rank, communicator and a 256-byte device buffer) and wait.
template <class Issue>
void two_ranks_issue(const Issue& issue) {
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      cudaSetDevice(r);
      ncclComm_t comm = nullptr;
      ASSERT_EQ(ncclCommInitRank(&comm, 2, id, r), ncclSuccess) << ncclGetLastError(comm);
      void* buffer = nullptr;
      ASSERT_EQ(cudaMalloc(&buffer, 256), cudaSuccess);
      issue(r, comm, buffer);
      cudaStreamSynchronize(nullptr);
      cudaFree(buffer);
      ncclCommDestroy(comm);
    });
  for (std::thread& t : ranks) t.join();
}

void counts_differ() {
  two_ranks_issue([](int r, ncclComm_t comm, void* buffer) {
    ncclAllReduce(buffer, buffer, r == 0 ? 4 : 8, ncclFloat32, ncclSum, comm, nullptr);
  });
}
void send_without_receive() {
  two_ranks_issue([](int r, ncclComm_t comm, void* buffer) {
    if (r == 0) ncclSend(buffer, 4, ncclFloat32, 1, comm, nullptr);
    if (r == 1) ncclRecv(buffer, 4, ncclFloat32, 1, comm, nullptr);  // from itself, not from rank 0
  });
}

TEST(NcclStandIn, WhatNcclWouldHangOnFailsTheTest) {
  EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS(counts_differ(),
                                         "rank 0 calls ncclAllReduce(count 4, type 7, op 0) where rank 1 calls "
                                         "ncclAllReduce(count 8, type 7, op 0)");
  EXPECT_NONFATAL_FAILURE_ON_ALL_THREADS(send_without_receive(),
                                         "rank 0 sends ncclSend(count 4, type 7, peer 1) to rank 1, which receives "
                                         "nothing");
}

// Rank 1 queues an all-reduce of communicator B ({1, 2}) before one of A ({0, 1}) on its stream, and rank 2 issues
// its part of B late: A's all-reduce, which rank 0 waits for, waits for B's, as on a GPU; both sum right.
TEST(NcclStandIn, ACollectiveWaitsForWhatAnotherRankQueuedBeforeIt) {
  ncclUniqueId a, b;
  ASSERT_EQ(ncclGetUniqueId(&a), ncclSuccess);
  ASSERT_EQ(ncclGetUniqueId(&b), ncclSuccess);
  std::vector<std::array<float, 2>> got(3);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.emplace_back([&, r] {
      cudaSetDevice(r);
      ncclComm_t in_a = nullptr, in_b = nullptr;
      const ncclResult_t joined_a = r <= 1 ? ncclCommInitRank(&in_a, 2, a, r) : ncclSuccess;
      const ncclResult_t joined_b = r >= 1 ? ncclCommInitRank(&in_b, 2, b, r - 1) : ncclSuccess;
      EXPECT_EQ(joined_a, ncclSuccess);
      EXPECT_EQ(joined_b, ncclSuccess);
      float* buffer = nullptr;  // [A's value, B's value]
      ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&buffer), 2 * sizeof(float)), cudaSuccess);
      const std::array<float, 2> mine = {float(r + 1), float(r + 1)};
      cudaMemcpy(buffer, mine.data(), sizeof mine, cudaMemcpyHostToDevice);
      if (r == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      const ncclResult_t summed_b = in_b ? ncclAllReduce(buffer + 1, buffer + 1, 1, ncclFloat32, ncclSum, in_b, nullptr)
                                         : ncclSuccess;
      const ncclResult_t summed_a = in_a ? ncclAllReduce(buffer, buffer, 1, ncclFloat32, ncclSum, in_a, nullptr)
                                         : ncclSuccess;
      EXPECT_EQ(summed_b, ncclSuccess);
      EXPECT_EQ(summed_a, ncclSuccess);
      cudaMemcpy(got[size_t(r)].data(), buffer, sizeof mine, cudaMemcpyDeviceToHost);
      cudaFree(buffer);
      ncclCommDestroy(in_a);
      ncclCommDestroy(in_b);
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_EQ(got[0][0], 3.0f);  // A: 1 + 2
  EXPECT_EQ(got[1][0], 3.0f);
  EXPECT_EQ(got[1][1], 5.0f);  // B: 2 + 3
  EXPECT_EQ(got[2][1], 5.0f);
}

TEST(NcclStandIn, ChecksTheArgumentsAsNcclDoes) {
  two_ranks_issue([](int r, ncclComm_t comm, void* buffer) {
    float on_host[4] = {};
    EXPECT_EQ(ncclAllReduce(on_host, buffer, 4, ncclFloat32, ncclSum, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("sendbuff is not device memory of cuda:" + std::to_string(r)),
              std::string::npos)
        << ncclGetLastError(comm);
    EXPECT_EQ(ncclBroadcast(buffer, buffer, 65, ncclFloat32, 0, comm, nullptr), ncclInvalidArgument);
    EXPECT_NE(std::string(ncclGetLastError(comm)).find("buff of 260 bytes ends past its allocation"),
              std::string::npos)
        << ncclGetLastError(comm);
    EXPECT_EQ(ncclSend(buffer, 1, ncclFloat32, 2, comm, nullptr), ncclInvalidArgument);
    EXPECT_EQ(ncclGroupEnd(), ncclInvalidUsage);
    // a matched exchange after the refused calls, so that both ranks' operations still pair up
    ncclGroupStart();
    ncclSend(buffer, 4, ncclFloat32, 1 - r, comm, nullptr);
    ncclRecv(static_cast<char*>(buffer) + 128, 4, ncclFloat32, 1 - r, comm, nullptr);
    EXPECT_EQ(ncclGroupEnd(), ncclSuccess);
  });
  // Two ranks on cuda:0: whichever joins second is refused, and joins again on cuda:1.
  ncclUniqueId id;
  ASSERT_EQ(ncclGetUniqueId(&id), ncclSuccess);
  std::vector<std::string> refusals(2);
  std::vector<std::thread> ranks;
  for (int r = 0; r < 2; ++r)
    ranks.emplace_back([&, r] {
      cudaSetDevice(0);
      ncclComm_t comm = nullptr;
      ncclResult_t joined = ncclCommInitRank(&comm, 2, id, r);
      if (joined == ncclInvalidUsage) {
        refusals[size_t(r)] = ncclGetLastError(nullptr);
        cudaSetDevice(1);
        joined = ncclCommInitRank(&comm, 2, id, r);
      }
      EXPECT_EQ(joined, ncclSuccess) << ncclGetLastError(nullptr);
      ncclCommDestroy(comm);
    });
  for (std::thread& t : ranks) t.join();
  EXPECT_NE(refusals[0].empty(), refusals[1].empty());
  EXPECT_NE((refusals[0] + refusals[1]).find("Duplicate GPU detected"), std::string::npos) << refusals[0] + refusals[1];
}

}  // namespace
}  // namespace uoe
