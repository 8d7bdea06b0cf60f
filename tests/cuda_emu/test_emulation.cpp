// The CUDA stand-in itself (tests/cuda_emu/include): that it reports what it promises to (a deadlock at a barrier,
// a missing barrier, a bad launch, work read before the host waited for it, the host touching device memory, a
// kernel that depends on the order of its blocks) and rounds as nvcc's code does (fused multiply-adds, unfused _rn
// intrinsics, math functions off by CUDA's documented error), so that the emulated tests can fail.
#include <cuda_runtime.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "cuda/dynamic_smem.cuh"

namespace uoe {
namespace {

constexpr unsigned kThreads = 64;

// Each thread writes its slot of shared memory, then reads its neighbour's, after a barrier or not.
__global__ void neighbour_kernel(uint32_t* out, bool barrier) {
  auto* slots = reinterpret_cast<uint32_t*>(cuda::dynamic_smem());
  const unsigned t = threadIdx.x;
  slots[t] = t;
  if (barrier) __syncthreads();
  out[t] = slots[(t + 1) % blockDim.x];
}

// a b + c and the same with the _rn intrinsics, on values where one rounding and two differ: (1 + 2^-12)^2 is
// 1 + 2^-11 + 2^-24, whose rounded product is 1 + 2^-11 (a tie, to even).
__global__ void multiply_add_kernel(const float* in, float* out) {
  out[0] = in[0] * in[1] + in[2];
  out[1] = __fadd_rn(__fmul_rn(in[0], in[1]), in[2]);
}

TEST(CudaEmulation, AMultiplyAddIsFusedAsNvccFusesItAndTheRnIntrinsicsAreNot) {
#if !UOE_EMU_FUSES_MULTIPLY_ADD
  GTEST_SKIP() << "this build machine has no FMA, so the emulated kernels round every product (CMakeLists.txt)";
#endif
  const float a = 1.0f + 0x1p-12f;
  const std::vector<float> in{a, a, -(1.0f + 0x1p-11f)};
  std::vector<float> out(2);
  cuda_emu::launch(1, 1, [&] { multiply_add_kernel(in.data(), out.data()); });
  EXPECT_EQ(out[0], 0x1p-24f) << "fused: the exact product, rounded once after the add";
  EXPECT_EQ(out[1], 0.0f) << "the product rounded before the add";
}

TEST(CudaEmulation, AMissingBarrierReadsThePoisonAndABarrierTheWrite) {
#if UOE_EMU_TSAN
  GTEST_SKIP() << "a race by design, which ThreadSanitizer reports: AMissingBarrierIsAReportedRace checks that";
#endif
  std::vector<uint32_t> out(kThreads);
  cuda_emu::launch(1, kThreads, [&] { neighbour_kernel(out.data(), false); }, kThreads * sizeof(uint32_t));
  EXPECT_EQ(out[0], 0xffffffffu) << "thread 0 read thread 1's slot before thread 1 wrote it";
  cuda_emu::launch(1, kThreads, [&] { neighbour_kernel(out.data(), true); }, kThreads * sizeof(uint32_t));
  for (unsigned t = 0; t < kThreads; ++t) EXPECT_EQ(out[t], (t + 1) % kThreads);
}

// Under ThreadSanitizer (scripts/race_check.sh), the missing barrier is a race it reports (and exits with its code,
// 66); with the barrier there is none, in either of two blocks.
TEST(CudaEmulation, AMissingBarrierIsAReportedRace) {
#if !UOE_EMU_TSAN
  GTEST_SKIP() << "ThreadSanitizer's build only (scripts/race_check.sh)";
#endif
  // A child started afresh: in a child forked from a process with several threads (fibers count), ThreadSanitizer
  // checks nothing.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const auto run = [](bool barrier) {
    std::vector<uint32_t> out(kThreads);
    for (bool b : {true, barrier})  // a clean launch first: the second reuses its threads
      cuda_emu::launch(2, kThreads, [&] { neighbour_kernel(out.data(), b); }, kThreads * sizeof(uint32_t));
    std::exit(0);
  };
  EXPECT_EXIT(run(false), ::testing::ExitedWithCode(66), "ThreadSanitizer: data race");
  EXPECT_EXIT(run(true), ::testing::ExitedWithCode(0), "");
}

// Half the block returns before a barrier the other half waits at.
__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x >= kThreads / 2) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

TEST(CudaEmulation, ABarrierSomeThreadsNeverReachIsADeadlock) {
  std::vector<int> out(kThreads, 0);
  EXPECT_NONFATAL_FAILURE(cuda_emu::launch(1, kThreads, [&] { divergent_barrier_kernel(out.data()); }),
                          "deadlock in block 0");
}

__global__ void fill_kernel(int* out, int value) { out[threadIdx.x] = value; }

TEST(CudaEmulation, ABadLaunchSetsTheErrorAndRunsNothing) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 2048 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, 2048 * sizeof(int)), cudaSuccess);  // on the legacy stream, as the copy below
  cuda_emu::launch_kernel([](auto&&... a) { fill_kernel(a...); }, 1, 2048)(d, 7);  // over 1024 threads
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // read once
  cuda_emu::launch_kernel([](auto&&... a) { fill_kernel(a...); }, 1, 32, 228 << 10)(d, 7);  // past 227 KiB
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  int host = -1;
  ASSERT_EQ(cudaMemcpy(&host, d, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(host, 0);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

// Device memory is open only to device work: the host's own read of it faults (as on a GPU), and so does a kernel's
// read past an allocation's end.
TEST(CudaEmulation, TheHostCannotTouchDeviceMemoryNorAKernelReadPastIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 64 * sizeof(int)), cudaSuccess);  // 256 bytes, no rounding
  ASSERT_EQ(cudaMemsetAsync(d, 0, 64 * sizeof(int)), cudaSuccess);
  int last = -1;
  ASSERT_EQ(cudaMemcpy(&last, d + 63, sizeof last, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(last, 0);
  EXPECT_DEATH(std::printf("%d\n", *static_cast<volatile int*>(d)), "");
  EXPECT_DEATH(
      {
        cuda_emu::DeviceAccess device_work;
        std::printf("%d\n", static_cast<volatile int*>(d)[64]);
      },
      "");
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

TEST(CudaEmulation, QueuedWorkRunsWhenTheHostWaitsAndInStreamOrder) {
  int* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), 32 * sizeof(int)), cudaSuccess);
  cudaStream_t a = nullptr, b = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(d, 0, 32 * sizeof(int)), cudaSuccess);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  // A copy on the legacy stream, which does not wait for the non-blocking streams a and b.
  const auto read = [d](int i) {
    int v = -1;
    EXPECT_EQ(cudaMemcpy(&v, d + i, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  };
  cuda_emu::launch_kernel([](auto&&... x) { fill_kernel(x...); }, 1, 32, 0, a)(d, 5);
  EXPECT_EQ(cudaStreamQuery(a), cudaErrorNotReady);
  EXPECT_EQ(read(0), 0) << "the kernel ran before anything waited for it";
  // b's fill is ordered after a's by an event: a's runs first although only b is waited for
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, a), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(b, e, 0), cudaSuccess);
  cuda_emu::launch_kernel([](auto&&... x) { fill_kernel(x...); }, 1, 32, 0, b)(d, 9);
  ASSERT_EQ(cudaStreamSynchronize(b), cudaSuccess);
  EXPECT_EQ(read(31), 9);
  EXPECT_EQ(cudaStreamQuery(a), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(e), cudaSuccess);
  ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(a), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(b), cudaSuccess);
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

// As CUDA lets it be: an event destroyed while its record is still queued (the NCCL communicator's `ready` event)
// lives until the record runs. Freed at once, the record wrote into freed memory: AddressSanitizer (CI's sanitizer
// build) reports it here.
TEST(CudaEmulation, AnEventDestroyedBeforeItsRecordRunsLivesUntilItHas) {
  cudaStream_t s = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t e = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&e, cudaEventDefault), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(e, s), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(s), cudaErrorNotReady);
  ASSERT_EQ(cudaEventDestroy(e), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(s), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(s), cudaSuccess);
}

// Every block writes its index to the same element, without an atomic: which block wins depends on the order.
__global__ void last_block_wins_kernel(uint32_t* out) {
  if (threadIdx.x == 0) out[0] = blockIdx.x;
}

TEST(CudaEmulation, ReversedBlocksChangeWhatAKernelThatDependsOnBlockOrderWrites) {
  uint32_t* d = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&d), sizeof(uint32_t)), cudaSuccess);
  const auto winner = [d] {
    cuda_emu::launch_kernel([](auto&&... x) { last_block_wins_kernel(x...); }, 8, 32)(d);
    uint32_t v = 0;
    EXPECT_EQ(cudaMemcpy(&v, d, sizeof v, cudaMemcpyDeviceToHost), cudaSuccess);
    return v;
  };
  const bool saved = cuda_emu::blocks_reversed();
  cuda_emu::blocks_reversed() = false;
  EXPECT_EQ(winner(), 7u);
  cuda_emu::blocks_reversed() = true;
  EXPECT_EQ(winner(), 0u);
  cuda_emu::blocks_reversed() = saved;
  ASSERT_EQ(cudaFree(d), cudaSuccess);
}

// The kernels' math functions (uoe::cuda::expf, ... of cuda_emu/libdevice.h) are glibc's moved by at most CUDA's
// documented error, by some ulps for most arguments, the same for the same argument; exact results stay exact.
TEST(CudaEmulation, MathFunctionsAreAsInexactAsCudasAndNoMore) {
  const auto ulps = [](float a, float b) {
    return std::abs(int64_t(std::bit_cast<int32_t>(a)) - std::bit_cast<int32_t>(b));
  };
  int64_t moved = 0, worst = 0;
  for (int i = 1; i <= 1000; ++i) {
    const float x = -8.0f + 0.0161f * float(i);
    const int64_t e = ulps(cuda::expf(x), std::exp(x)), l = ulps(cuda::logf(x + 9.0f), std::log(x + 9.0f)),
                  t = ulps(cuda::tanhf(x), std::tanh(x));
    EXPECT_EQ(cuda::expf(x), cuda::expf(x));
    EXPECT_LE(e, 2) << x;
    EXPECT_LE(l, 1) << x;
    EXPECT_LE(t, 2) << x;
    moved += e > 0;
    worst = std::max({worst, e, l, t});
  }
  EXPECT_GT(moved, 500) << "expf should differ from glibc's for most arguments";
  EXPECT_EQ(worst, 2);
  EXPECT_EQ(cuda::expf(0.0f), 1.0f);
  EXPECT_EQ(cuda::exp2f(-3.0f), 0.125f);
  EXPECT_EQ(cuda::logf(1.0f), 0.0f);
  EXPECT_EQ(cuda::exp(-1.0e300), 0.0);
}

}  // namespace
}  // namespace uoe
