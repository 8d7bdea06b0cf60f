// Devices, streams and events (cuda/stream.h): guards restore what they change, events time and order work.
// Skips without a GPU.
#include <gtest/gtest.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "cuda/check.h"
#include "cuda/cuda_api.h"
#include "cuda/host_upload.h"
#include "cuda/stream.h"

namespace uoe {
namespace {

class CudaStream : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

TEST_F(CudaStream, DefaultStreamIsTheLegacyStreamAndGuardsRestoreIt) {
  EXPECT_EQ(cuda::current_stream(0), nullptr);
  cudaStream_t s = nullptr;
  UOE_CUDA_CHECK("test", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  {
    cuda::StreamGuard guard(0, s);
    EXPECT_EQ(cuda::current_stream(0), s);
    // Copies run on the current stream and are synchronous.
    const Tensor t = full({4096}, 1.5, TensorOptions{}.with_device(Device::cuda(0)));
    cuda::synchronize(0, "test");
    EXPECT_EQ(t.to(Device::cpu()).to_vector<float>(), std::vector<float>(4096, 1.5f));
  }
  EXPECT_EQ(cuda::current_stream(0), nullptr);
  UOE_CUDA_CHECK("test", cudaStreamDestroy(s));
}

TEST_F(CudaStream, DeviceGuardRestoresTheDevice) {
  int before = -1, inside = -1, after = -1;
  UOE_CUDA_CHECK("test", cudaGetDevice(&before));
  {
    cuda::DeviceGuard guard(cuda::device_count() - 1);
    UOE_CUDA_CHECK("test", cudaGetDevice(&inside));
  }
  UOE_CUDA_CHECK("test", cudaGetDevice(&after));
  EXPECT_EQ(inside, cuda::device_count() - 1);
  EXPECT_EQ(after, before);
  EXPECT_THROW(cuda::DeviceGuard(cuda::device_count() + 5), Error);
}

TEST_F(CudaStream, EventsTimeWork) {
  cuda::Event start(true), stop(true);
  const cudaStream_t s = cuda::current_stream(0);
  start.record(s);
  const Tensor t = full({1 << 22}, 2.0, TensorOptions{}.with_device(Device::cuda(0)));
  stop.record(s);
  stop.synchronize();
  EXPECT_GE(stop.elapsed_ms(start), 0.0f);
  cuda::Event order;
  order.record(s);
  order.wait(s);
  order.synchronize();
  cuda::synchronize(0, "test");
}

TEST_F(CudaStream, SetDeviceMakesTheGpuCurrent) {
  const int last = cuda::device_count() - 1;
  cuda::set_device(last);
  int now = -1;
  UOE_CUDA_CHECK("test", cudaGetDevice(&now));
  EXPECT_EQ(now, last);
  cuda::set_device(0);
}

// More uploads than the staging ring has buffers, of growing and shrinking sizes; the host source is overwritten
// as soon as each call returns.
TEST_F(CudaStream, HostUploadsArriveWhateverTheHostDoesNext) {
  const cudaStream_t s = cuda::current_stream(0);
  for (int i = 0; i < 100; ++i) {
    const int64_t n = 1 + (int64_t(i) * 7919) % 20000;
    std::vector<int64_t> host(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) host[size_t(j)] = j * 31 + i;
    const std::vector<int64_t> want = host;
    const Tensor dev = empty({n}, TensorOptions{}.with_dtype(DType::Int64).with_device(Device::cuda(0)));
    cuda::upload_async(dev.raw_data(), host.data(), host.size() * sizeof(int64_t), 0, s, "test");
    std::fill(host.begin(), host.end(), -1);
    ASSERT_EQ(dev.to(Device::cpu()).to_vector<int64_t>(), want) << "upload " << i << " of " << n << " elements";
  }
}

// Without a GPU too: a device that does not exist is refused by name.
TEST(CudaSetDevice, RefusesADeviceThatDoesNotExist) {
  try {
    cuda::set_device(cuda::device_count());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[set_device] cuda:" + std::to_string(cuda::device_count())),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace uoe
