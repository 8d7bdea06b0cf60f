// Caching device allocator: statistics, block reuse, blocks used on a second stream (record_stream), small-block
// packing, empty_cache, the out-of-memory message, thread safety; and the CUDA error checks. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/tensor.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"

namespace uoe {
namespace {

class CudaAllocator : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
    if (!cuda::caching()) GTEST_SKIP() << "UOE_CUDA_NO_CACHING is set: tests of the cache skipped";
  }
};

// With UOE_CUDA_NO_CACHING=1 (the emulated tests' CudaNoCaching entry in ctest): one cudaMalloc per request.
class CudaAllocatorWithoutCaching : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
    if (cuda::caching()) GTEST_SKIP() << "runs with UOE_CUDA_NO_CACHING=1 (ctest: CudaNoCaching)";
  }
};

constexpr size_t kMiB = size_t(1) << 20;

TEST(CudaCheck, ErrorsNameTheOpAndTheCall) {
  // Needs a CUDA build, not a GPU: the error code is made up.
  try {
    cuda::check_cuda(cudaErrorInvalidValue, "myop", "cudaMemcpy(dst, src, n)");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[myop] cudaMemcpy(dst, src, n) failed: cudaErrorInvalidValue"), std::string::npos) << msg;
  }
  EXPECT_NO_THROW(cuda::check_cuda(cudaSuccess, "myop", "nothing"));
}

TEST(CudaCheck, SizesRoundToTheirClass) {
  EXPECT_EQ(cuda::allocation_size(1), 512u);
  EXPECT_EQ(cuda::allocation_size(512), 512u);
  EXPECT_EQ(cuda::allocation_size(513), 1024u);
  EXPECT_EQ(cuda::allocation_size(kMiB), kMiB);
  EXPECT_EQ(cuda::allocation_size(kMiB + 1), 2 * kMiB);
  EXPECT_EQ(cuda::allocation_size(5 * kMiB), 6 * kMiB);
}

TEST_F(CudaAllocator, StatisticsFollowAllocationsAndFrees) {
  Allocator& a = cuda::caching_allocator();
  const AllocatorStats s0 = cuda::memory_stats(0);
  void* p = cuda::allocate_on(0, 1000);
  const AllocatorStats s1 = cuda::memory_stats(0);
  EXPECT_EQ(s1.allocated, s0.allocated + cuda::allocation_size(1000));
  EXPECT_GE(s1.reserved, s1.allocated);
  EXPECT_GE(s1.peak, s1.allocated);
  void* q = cuda::allocate_on(0, 3 * kMiB + 1);
  const AllocatorStats s2 = cuda::memory_stats(0);
  EXPECT_EQ(s2.allocated, s1.allocated + 4 * kMiB);
  EXPECT_GE(s2.peak, s2.allocated);
  a.deallocate(q, 3 * kMiB + 1);
  a.deallocate(p, 1000);
  const AllocatorStats s3 = cuda::memory_stats(0);
  EXPECT_EQ(s3.allocated, s0.allocated);
  EXPECT_EQ(s3.reserved, s2.reserved);  // cached, not returned
  EXPECT_EQ(s3.peak, s2.peak);
  // The registered allocator for cuda:0 is this one, and tensors go through it.
  EXPECT_EQ(&allocator_for(Device::cuda(0)), &a);
  {
    const Tensor t = empty({1000, 1000}, TensorOptions{}.with_device(Device::cuda(0)));
    EXPECT_EQ(cuda::memory_stats(0).allocated, s0.allocated + cuda::allocation_size(4000000));
  }
  EXPECT_EQ(cuda::memory_stats(0).allocated, s0.allocated);
}

TEST_F(CudaAllocatorWithoutCaching, EveryRequestIsItsOwnAllocationAndFreedMemoryGoesBack) {
  Allocator& a = cuda::caching_allocator();
  const AllocatorStats s0 = cuda::memory_stats(0);
  size_t free0 = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
  void* p = cuda::allocate_on(0, 1000);
  void* q = cuda::allocate_on(0, 3 * kMiB + 1);
  const AllocatorStats s1 = cuda::memory_stats(0);
  EXPECT_EQ(s1.allocated, s0.allocated + 1000 + 3 * kMiB + 1);  // no rounding to size classes
  EXPECT_EQ(s1.reserved - s0.reserved, s1.allocated - s0.allocated);
  a.deallocate(p, 1000);
  a.deallocate(q, 3 * kMiB + 1);
  const AllocatorStats s2 = cuda::memory_stats(0);
  EXPECT_EQ(s2.allocated, s0.allocated);
  EXPECT_EQ(s2.reserved, s0.reserved);  // nothing kept
  size_t free2 = 0;
  ASSERT_EQ(cudaMemGetInfo(&free2, &total), cudaSuccess);
  EXPECT_EQ(free2, free0);
}

TEST_F(CudaAllocator, TensorsLandOnTheirOwnDeviceWhateverTheCurrentOne) {
  EXPECT_THROW(cuda::caching_allocator().allocate(64, Device::cpu()), Error);
  if (cuda::device_count() < 2) GTEST_SKIP() << "one GPU visible: a tensor for cuda:1 needs two";
  cuda::DeviceGuard current(0);
  const Tensor t = empty({1024}, TensorOptions{}.with_device(Device::cuda(1)));
  cudaPointerAttributes attributes{};
  ASSERT_EQ(cudaPointerGetAttributes(&attributes, t.raw_data()), cudaSuccess);
  EXPECT_EQ(attributes.device, 1);
  EXPECT_GT(cuda::memory_stats(1).allocated, 0u);
}

TEST_F(CudaAllocator, FreedBlockIsReused) {
  Allocator& a = cuda::caching_allocator();
  a.empty_cache();
  const size_t n = 37 * kMiB + 1;
  void* p = cuda::allocate_on(0, n);
  a.deallocate(p, n);
  const size_t reserved = cuda::memory_stats(0).reserved;
  void* q = cuda::allocate_on(0, n);
  EXPECT_EQ(q, p);
  EXPECT_EQ(cuda::memory_stats(0).reserved, reserved);
  a.deallocate(q, n);
  // A smaller request is carved out of the cached block instead of a new cudaMalloc.
  void* r = cuda::allocate_on(0, 5 * kMiB);
  EXPECT_EQ(cuda::memory_stats(0).reserved, reserved);
  a.deallocate(r, 5 * kMiB);
}

// Keeps `stream` busy for tens of milliseconds (400 passes over a 256 MiB buffer), far longer than the host
// takes to free and allocate.
void occupy(cudaStream_t stream, void* scratch, size_t bytes) {
  for (int i = 0; i < 400; ++i) UOE_CUDA_CHECK("test", cudaMemsetAsync(scratch, i, bytes, stream));
}

// A block that work on a second stream still uses is not handed out again until that work is done
// (record_stream), and is once it is; empty_cache waits for it.
TEST_F(CudaAllocator, BlockUsedOnAnotherStreamIsNotReusedBeforeThatStreamIsDone) {
  Allocator& a = cuda::caching_allocator();
  a.empty_cache();
  const size_t n = 64 * kMiB, scratch_bytes = 256 * kMiB;
  cudaStream_t side = nullptr;
  UOE_CUDA_CHECK("test", cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  void* scratch = cuda::allocate_on(0, scratch_bytes);
  void* block = cuda::allocate_on(0, n);
  occupy(side, scratch, scratch_bytes);
  UOE_CUDA_CHECK("test", cudaMemsetAsync(block, 0x7f, n, side));  // the side stream's late write into the block
  cuda::record_stream(block, side);
  const size_t allocated = cuda::memory_stats(0).allocated;
  a.deallocate(block, n);
  EXPECT_EQ(cuda::memory_stats(0).allocated, allocated - n);  // no tensor holds it any more
  void* during = cuda::allocate_on(0, n);
  ASSERT_EQ(cudaStreamQuery(side), cudaErrorNotReady) << "the side stream finished before the check: nothing tested";
  EXPECT_NE(during, block);
  UOE_CUDA_CHECK("test", cudaMemsetAsync(during, 0x01, n, cuda::current_stream(0)));
  UOE_CUDA_CHECK("test", cudaStreamSynchronize(side));
  std::vector<unsigned char> host(n);
  UOE_CUDA_CHECK("test", cudaMemcpy(host.data(), during, n, cudaMemcpyDeviceToHost));
  EXPECT_EQ(std::count(host.begin(), host.end(), 0x01), std::ptrdiff_t(n));  // not overwritten by the side stream
  void* after = cuda::allocate_on(0, n);
  EXPECT_EQ(after, block);  // the side stream is done: the block is back in the pool
  a.deallocate(during, n);

  // Freed while the side stream still uses it, then the cache is emptied: empty_cache waits, and returns it.
  cuda::record_stream(after, side);
  occupy(side, scratch, scratch_bytes);
  a.deallocate(after, n);
  const size_t reserved = cuda::memory_stats(0).reserved;
  a.empty_cache();
  EXPECT_EQ(cudaStreamQuery(side), cudaSuccess);
  EXPECT_LE(cuda::memory_stats(0).reserved, reserved - n);
  a.deallocate(scratch, scratch_bytes);
  UOE_CUDA_CHECK("test", cudaStreamDestroy(side));
}

// A block freed on one stream, whose work there may still be queued, is not handed to a request on another stream
// (whose work nothing orders after it); requests on that other stream get its own segments, small and large, and
// the block goes back to requests on its own stream.
TEST_F(CudaAllocator, FreedBlockServesOnlyItsOwnStream) {
  Allocator& a = cuda::caching_allocator();
  a.empty_cache();
  cudaStream_t side = nullptr;
  UOE_CUDA_CHECK("test", cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking));
  for (const size_t n : {size_t(4096), 37 * kMiB + 1}) {
    void* p = cuda::allocate_on(0, n);
    UOE_CUDA_CHECK("test", cudaMemsetAsync(p, 0x11, n, cuda::current_stream(0)));  // may still be queued
    a.deallocate(p, n);
    void* q = nullptr;
    {
      cuda::StreamGuard guard(0, side);
      q = cuda::allocate_on(0, n);
    }
    EXPECT_NE(q, p) << n << " bytes";
    void* r = cuda::allocate_on(0, n);
    EXPECT_EQ(r, p) << n << " bytes";
    a.deallocate(r, n);
    a.deallocate(q, n);
  }
  cuda::synchronize(0, "test");
  UOE_CUDA_CHECK("test", cudaStreamDestroy(side));
}

TEST_F(CudaAllocator, RecordStreamOfTheBlocksOwnStreamOrForeignMemoryChangesNothing) {
  Allocator& a = cuda::caching_allocator();
  const size_t n = 3 * kMiB;
  void* p = cuda::allocate_on(0, n);
  cuda::record_stream(p, cuda::current_stream(0));  // its own stream: freed at once
  a.deallocate(p, n);
  void* q = cuda::allocate_on(0, n);
  EXPECT_EQ(q, p);
  a.deallocate(q, n);
  int on_stack = 0;
  EXPECT_NO_THROW(cuda::record_stream(&on_stack, cuda::current_stream(0)));
}

TEST(CudaRecordStream, RefusesAHostTensor) {
  // Needs a CUDA build, not a GPU.
  try {
    cuda::record_stream(zeros({4}), nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[record_stream] takes a CUDA tensor, got cpu"), std::string::npos)
        << e.what();
  }
}

TEST_F(CudaAllocator, SmallBlocksShareOneSegment) {
  Allocator& a = cuda::caching_allocator();
  a.empty_cache();
  const size_t r0 = cuda::memory_stats(0).reserved;
  std::vector<void*> ptrs;
  for (int i = 0; i < 100; ++i) ptrs.push_back(cuda::allocate_on(0, 700));
  EXPECT_LE(cuda::memory_stats(0).reserved - r0, cuda::kSmallSegment);
  for (void* p : ptrs) a.deallocate(p, 700);
}

TEST_F(CudaAllocator, EmptyCacheReturnsReservedMemory) {
  Allocator& a = cuda::caching_allocator();
  a.empty_cache();  // so that the request below gets a segment of its own
  void* p = cuda::allocate_on(0, 64 * kMiB);
  a.deallocate(p, 64 * kMiB);
  const size_t before = cuda::memory_stats(0).reserved;
  ASSERT_GE(before, 64 * kMiB);
  a.empty_cache();
  const AllocatorStats after = cuda::memory_stats(0);
  EXPECT_LE(after.reserved, before - 64 * kMiB);
  EXPECT_GE(after.reserved, after.allocated);
  EXPECT_EQ(a.stats().reserved, after.reserved);  // one device: the totals are its numbers
}

TEST_F(CudaAllocator, ImpossibleRequestRaisesOutOfMemoryWithTheNumbers) {
  const size_t huge = size_t(1) << 50;  // 1 PiB
  try {
    cuda::allocate_on(0, huge);
    FAIL() << "expected an out-of-memory error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("[cuda allocator] out of memory on cuda:0: requested 1073741824.00 MiB, "), std::string::npos)
        << msg;
    EXPECT_NE(msg.find(" MiB in use by tensors, "), std::string::npos) << msg;
    EXPECT_NE(msg.find(" MiB reserved (cached)"), std::string::npos) << msg;
  }
  // Through a tensor, and the device still works afterwards.
  EXPECT_THROW(empty({int64_t(1) << 48}, TensorOptions{}.with_device(Device::cuda(0))), Error);
  const Tensor t = full({1000}, 3.0, TensorOptions{}.with_device(Device::cuda(0)));
  EXPECT_EQ(t.to(Device::cpu()).to_vector<float>(), std::vector<float>(1000, 3.0f));
}

TEST_F(CudaAllocator, ThreadsAllocateAndFreeConcurrently) {
  Allocator& a = cuda::caching_allocator();
  const size_t base = cuda::memory_stats(0).allocated;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&a, t] {
      std::mt19937 rng{uint32_t(t)};
      std::vector<std::pair<void*, size_t>> live;
      for (int i = 0; i < 2000; ++i) {
        if (!live.empty() && rng() % 2) {
          const size_t k = rng() % live.size();
          a.deallocate(live[k].first, live[k].second);
          live.erase(live.begin() + std::ptrdiff_t(k));
        } else {
          const size_t n = rng() % 3 == 0 ? size_t(rng() % (8 << 20)) + 1 : size_t(rng() % 4096) + 1;
          live.emplace_back(cuda::allocate_on(0, n), n);
        }
      }
      for (auto& [p, n] : live) a.deallocate(p, n);
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(cuda::memory_stats(0).allocated, base);
}

}  // namespace
}  // namespace uoe
