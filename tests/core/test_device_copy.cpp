// Core's copies across devices (core/device_copy.h), which the safetensors writer and the one-rank collectives use
// below the op layer: host_contiguous gathers any view in row-major order, as Tensor::contiguous() does, and a copy
// that involves a GPU needs one.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/device_copy.h"
#include "core/error.h"
#include "cuda/cuda_api.h"
#include "ops/ops.h"

namespace uoe {
namespace {

// The bytes of a contiguous CPU tensor.
std::string bytes(const Tensor& t) {
  EXPECT_TRUE(t.is_cpu() && t.is_contiguous());
  return std::string(static_cast<const char*>(t.raw_data()), size_t(t.numel()) * t.itemsize());
}

// Views of every kind: transposed, strided, broadcast (stride 0), offset, 0-d, empty, and of 1- and 8-byte dtypes.
std::vector<Tensor> views() {
  const Tensor a = randn({2, 3, 4});
  return {a,
          a.transpose(0, 2),
          a.slice(2, 1, 4, 2),
          arange(0, 3).reshape({3, 1}).expand({3, 4}),
          a.select(1, 2),
          a.select(0, 1).select(0, 2).select(0, 3),
          a.narrow(1, 1, 0),
          ops::gt(a, zeros({})).transpose(1, 2),
          arange(0, 12, 1, TensorOptions{}.with_dtype(DType::Int64)).reshape({3, 4}).mT()};
}

TEST(DeviceCopy, HostContiguousGathersEveryViewLikeContiguous) {
  for (const Tensor& v : views()) {
    const Tensor h = host_contiguous(v);
    EXPECT_EQ(h.shape(), v.shape());
    EXPECT_EQ(h.dtype(), v.dtype());
    EXPECT_EQ(bytes(h), bytes(v.contiguous())) << shape_str(v.shape());
  }
}

TEST(DeviceCopy, HostContiguousKeepsAContiguousCpuTensorsMemory) {
  const Tensor a = randn({4, 5}).requires_grad_();
  const Tensor h = host_contiguous(a);
  EXPECT_EQ(h.raw_data(), a.raw_data());
  EXPECT_FALSE(h.requires_grad());
}

TEST(DeviceCopy, GpuTensorsAreGatheredOnTheHost) {
  if (!cuda::is_available()) {
    std::vector<float> host(4);
    const Tensor src = zeros({4});
    try {
      copy_across_devices(host.data(), Device::cpu(), src.raw_data(), Device::cuda(0), 16);
      ADD_FAILURE() << "a copy from a GPU ran without one";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("[copy] a copy from cuda:0 to cpu needs a CUDA build with a visible GPU"),
                std::string::npos)
          << e.what();
    }
    GTEST_SKIP() << "no CUDA device visible: the GPU gathers are not run";
  }
  for (const Tensor& v : views()) {
    const Tensor g = v.to(Device::cuda());  // a contiguous copy: take views of it on the GPU as well
    EXPECT_EQ(bytes(host_contiguous(g)), bytes(v.contiguous())) << shape_str(v.shape());
    if (g.dim() == 2) {
      EXPECT_EQ(bytes(host_contiguous(g.mT())), bytes(v.mT().contiguous())) << shape_str(v.shape());
    }
    if (g.dim() == 3) {
      EXPECT_EQ(bytes(host_contiguous(g.slice(1, 1, 3).transpose(0, 2))),
                bytes(v.slice(1, 1, 3).transpose(0, 2).contiguous()))
          << shape_str(v.shape());
    }
  }
}

}  // namespace
}  // namespace uoe
