// The NCCL communicator on one rank (its bootstrap a LocalCommunicator): each collective's result, collectives
// ordered after the work queued on the current stream before them and work on the current stream ordered after
// collectives that run on the communication stream, an async all-reduce dropped without wait(), and wait() ordering
// the communicator's GPU whichever device is current. Skips without a GPU.
#include <gtest/gtest.h>

#include "core/communicator.h"
#include "cuda/cuda_api.h"
#include "cuda/nccl_communicator.h"
#include "ops/ops.h"

namespace uoe {
namespace {

#if UOE_WITH_NCCL

class CudaNccl : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

// t on the GPU, written there by a kernel queued on the current stream (a copy from the host waits for itself): a
// collective must wait for it.
Tensor on_gpu(const Tensor& t, int device = 0) { return t.to(Device::cuda(device)) * 1.0; }
std::vector<float> on_cpu(const Tensor& t) { return t.to(Device::cpu()).to_vector<float>(); }

TEST_F(CudaNccl, CollectivesOfOneRankKeepTheirValues) {
  LocalCommunicator bootstrap;
  const std::unique_ptr<Communicator> c = make_nccl_communicator(bootstrap, 0);
  const Tensor host = randn({1 << 20});
  const Tensor x = on_gpu(host);
  c->all_reduce(x);
  // the next kernel on the current stream reads what the collective left
  EXPECT_EQ(on_cpu(x * 2.0), on_cpu(host * 2.0));

  const Tensor in = on_gpu(randn({4, 3})), out = on_gpu(zeros({4, 3}));
  c->reduce_scatter(in, out);
  EXPECT_EQ(on_cpu(out), on_cpu(in));
  const Tensor gathered = on_gpu(zeros({3, 2})), part = on_gpu(randn({3, 2}));
  c->all_gather(part, gathered, {3});
  EXPECT_EQ(on_cpu(gathered), on_cpu(part));
  const Tensor sent = on_gpu(randn({5, 2})), received = on_gpu(zeros({5, 2}));
  c->all_to_all(sent, {5}, received, {5});
  EXPECT_EQ(on_cpu(received), on_cpu(sent));
  const Tensor b = on_gpu(randn({7}));
  const std::vector<float> before = on_cpu(b);
  c->broadcast(b, 0);
  EXPECT_EQ(on_cpu(b), before);
}

TEST_F(CudaNccl, AsyncAllReduceWaitedOrDropped) {
  LocalCommunicator bootstrap;
  const std::unique_ptr<Communicator> c = make_nccl_communicator(bootstrap, 0);
  const Tensor host = randn({1 << 22});
  const Tensor x = on_gpu(host);
  std::unique_ptr<Work> w = c->all_reduce_async(x);
  w->wait();
  EXPECT_EQ(on_cpu(x + 1.0), on_cpu(host + 1.0));
  // Dropped unwaited: its buffer may only be reused after the collective, and nothing fails.
  const Tensor y = on_gpu(host);
  w = c->all_reduce_async(y);
  w.reset();
  EXPECT_EQ(on_cpu(y), on_cpu(host));
}

TEST_F(CudaNccl, WaitOrdersTheCommunicatorsGpuWhicheverIsCurrent) {
  if (cuda::device_count() < 2) GTEST_SKIP() << "needs two GPUs";
  LocalCommunicator bootstrap;
  const std::unique_ptr<Communicator> c = make_nccl_communicator(bootstrap, 1);
  const Tensor host = randn({1 << 22});
  const Tensor x = on_gpu(host, 1);
  cuda::set_device(0);
  std::unique_ptr<Work> w = c->all_reduce_async(x);
  w->wait();
  EXPECT_EQ(on_cpu(x * 3.0), on_cpu(host * 3.0));
}

#endif

}  // namespace
}  // namespace uoe
