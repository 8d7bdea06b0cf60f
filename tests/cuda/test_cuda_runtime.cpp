// CUDA runtime: host/device copies and the fill kernel on a GPU; skips with a clear message without one.
#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda/cuda_api.h"
#include "ops/ops.h"

namespace uoe {
namespace {

class CudaRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

TEST_F(CudaRuntime, CopiesRoundTripEveryDtype) {
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int32, DType::Int64}) {
    const Tensor host = arange(0, 1000, 1, TensorOptions{}.with_dtype(t));
    const Tensor dev = host.to(Device::cuda(0));
    EXPECT_TRUE(dev.is_cuda());
    EXPECT_EQ(dev.to(Device::cpu()).to_vector<double>(), host.to_vector<double>()) << dtype_name(t);
  }
}

TEST_F(CudaRuntime, FillKernelWritesEveryElement) {
  const Tensor z = full({3, 1001}, 2.5, TensorOptions{}.with_device(Device::cuda(0)));
  EXPECT_EQ(z.to(Device::cpu()).to_vector<float>(), std::vector<float>(3003, 2.5f));
  const Tensor b = full({7}, -1.0, TensorOptions{}.with_dtype(DType::BFloat16).with_device(Device::cuda(0)));
  EXPECT_EQ(b.to(Device::cpu()).to_vector<float>(), std::vector<float>(7, -1.0f));
}

TEST_F(CudaRuntime, OpsOnTwoDevicesNameBoth) {
  const Tensor a = ones({2}, TensorOptions{}.with_device(Device::cuda(0))), b = ones({2});
  try {
    ops::add(a, b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[add] all tensors must be on one device, got float32[2] on cuda:0, float32[2] on cpu"),
              std::string::npos)
        << e.what();
  }
}

TEST_F(CudaRuntime, GradientsFlowBackAcrossDevices) {
  const Tensor x = ones({3}, TensorOptions{}.with_requires_grad());
  const Tensor back = x.to(Device::cuda(0)).to(Device::cpu());
  ops::sum(back * 2.0).backward();
  EXPECT_EQ(x.grad().to_vector<float>(), std::vector<float>(3, 2.0f));
}

}  // namespace
}  // namespace uoe
