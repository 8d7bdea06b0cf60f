// Tensor basics: dtypes, views without copies, contiguous, factories, RNG independence of
// thread count, casts, printing, item / to_vector, allocator alignment.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "cuda/cuda_api.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe {
namespace {

TEST(Tensor, FactoriesShapesAndValues) {
  Tensor z = zeros({2, 3});
  EXPECT_EQ(z.shape(), (Shape{2, 3}));
  EXPECT_EQ(z.strides(), (Shape{3, 1}));
  EXPECT_EQ(z.dtype(), DType::Float32);
  EXPECT_EQ(z.to_vector<float>(), std::vector<float>(6, 0.0f));
  EXPECT_EQ(ones({2}, TensorOptions{}.with_dtype(DType::Int32)).to_vector<int32_t>(), (std::vector<int32_t>{1, 1}));
  EXPECT_EQ(full({2}, 2.5, TensorOptions{}.with_dtype(DType::BFloat16)).to_vector<float>(), (std::vector<float>{2.5f, 2.5f}));
  EXPECT_EQ(arange(0, 5, 2, TensorOptions{}.with_dtype(DType::Int64)).to_vector<int64_t>(), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(scalar_tensor(3.0).dim(), 0);
  EXPECT_EQ(scalar_tensor(3.0).item<float>(), 3.0f);
  EXPECT_EQ(zeros({0, 4}).numel(), 0);
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int32, DType::Int64, DType::Bool})
    EXPECT_EQ(empty({3}, TensorOptions{}.with_dtype(t)).itemsize(), dtype_size(t));
}

// Half-precision fills store the element's bits in a vector loop: every element, across the threads' chunks and the
// loop's remainder, holds the value (and a fill over a strided view touches only the view).
TEST(Tensor, HalfPrecisionFillsEveryElement) {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    const int64_t n = 100003;
    EXPECT_EQ(full({n}, -1.75, TensorOptions{}.with_dtype(t)).to_vector<float>(), std::vector<float>(size_t(n), -1.75f));
    EXPECT_EQ(zeros({n}, TensorOptions{}.with_dtype(t)).to_vector<float>(), std::vector<float>(size_t(n), 0.0f));
    Tensor m = full({300, 301}, 2.0, TensorOptions{}.with_dtype(t));
    m.narrow(1, 1, 299).fill_(0.5);
    const std::vector<float> v = m.to_vector<float>();
    for (int64_t i = 0; i < 300; ++i)
      for (int64_t j = 0; j < 301; ++j)
        ASSERT_EQ(v[size_t(i * 301 + j)], j == 0 || j == 300 ? 2.0f : 0.5f) << dtype_name(t) << " at " << i << "," << j;
  }
}

TEST(Tensor, StorageIs64ByteAligned) {
  for (int64_t n : {1, 7, 100, 100000}) {
    Tensor t = empty({n});
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % 64, 0u) << n;
  }
}

TEST(Tensor, ViewsShareStorageWithoutCopies) {
  Tensor a = arange(0, 24).reshape({2, 3, 4});
  const void* base = a.storage().get();
  Tensor t = a.transpose(0, 2);
  EXPECT_EQ(t.shape(), (Shape{4, 3, 2}));
  EXPECT_EQ(t.strides(), (Shape{1, 4, 12}));
  EXPECT_FALSE(t.is_contiguous());
  for (const Tensor& v : {t, a.permute({1, 2, 0}), a.narrow(2, 1, 2), a.slice(1, 0, 3, 2), a.select(0, 1),
                          a.unsqueeze(1), a.view({6, 4}), a.reshape({4, 6}), a.reshape({2, 3, 4}).expand({5, 2, 3, 4})})
    EXPECT_EQ(v.storage().get(), base);
  EXPECT_EQ(a.narrow(2, 1, 2).offset(), 1);
  EXPECT_EQ(a.select(0, 1).to_vector<float>()[0], 12.0f);
  EXPECT_EQ(a.slice(2, 1, 4, 2).to_vector<float>(), (std::vector<float>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23}));
  // contiguous() of a transposed view copies, in row-major order of the view.
  Tensor c = a.transpose(1, 2).contiguous();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_NE(c.storage().get(), base);
  EXPECT_EQ(c.to_vector<float>()[1], 4.0f);
  // reshape of a non-viewable layout copies; view refuses with a clear message.
  EXPECT_THROW(a.transpose(0, 1).view({-1}), Error);
  EXPECT_EQ(a.transpose(0, 1).reshape({-1}).numel(), 24);
  EXPECT_EQ(a.unsqueeze(0).squeeze(0).shape(), a.shape());
  EXPECT_EQ(a.flatten(1).shape(), (Shape{2, 12}));
}

TEST(Tensor, ExpandUsesZeroStrides) {
  Tensor a = from_vector<float>({1, 2, 3}, {3, 1});
  Tensor e = a.expand({2, 3, 4});
  EXPECT_EQ(e.strides(), (Shape{0, 1, 0}));
  EXPECT_EQ(e.contiguous().to_vector<float>()[5], 2.0f);
}

TEST(Tensor, ExpandRefusesNegativeSizesAndNewMinusOneDims) {
  const Tensor a = ones({1});
  const std::string neg = uoe::testing::error_of([&] { a.expand({-5}); });
  EXPECT_NE(neg.find("[expand] cannot expand shape [1] to [-5]: dim 0 must be a size >= 0 or -1 (keep)"),
            std::string::npos) << neg;
  const std::string lead = uoe::testing::error_of([&] { ones({3}).expand({-1, 3}); });
  EXPECT_NE(lead.find("(a new dim cannot be -1)"), std::string::npos) << lead;
  EXPECT_EQ(ones({3}).expand({2, -1}).shape(), (Shape{2, 3}));  // -1 keeps an existing dim
}

TEST(Tensor, SizesPastInt64AreRefusedNotWrapped) {
  // 2^62 float32 elements need 2^64 bytes; 2^32 x 2^32 elements wrap int64 to 0: both once handed out a
  // zero-byte buffer.
  for (const Shape& shape : {Shape{int64_t(1) << 62}, Shape{int64_t(1) << 32, int64_t(1) << 32}}) {
    const std::string msg = uoe::testing::error_of([&] { empty(shape); });
    EXPECT_NE(msg.find("needs more than 2^63 bytes"), std::string::npos) << msg;
  }
  EXPECT_EQ(empty({int64_t(1) << 62, 0}).numel(), 0);  // no elements, whatever the other dims
  const std::string huge = uoe::testing::error_of([&] { empty({int64_t(1) << 60}); });  // 4 EiB: fits, too big
  EXPECT_NE(huge.find("out of memory"), std::string::npos) << huge;
  EXPECT_NE(uoe::testing::error_of([&] { arange(0, INFINITY); }).find("[arange] (end - start) / step must be finite"),
            std::string::npos);
}

TEST(Tensor, RandomNumbersDoNotDependOnThreadCount) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  Generator g1(42);
  const auto one = randn({1000, 257}, {}, &g1).to_vector<float>();
  const auto u1 = rand({300001}, {}, &g1).to_vector<float>();
  omp_set_num_threads(2);
  Generator g2(42);
  const auto two = randn({1000, 257}, {}, &g2).to_vector<float>();
  const auto u2 = rand({300001}, {}, &g2).to_vector<float>();
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(u1, u2);
  Generator g3(43);
  EXPECT_NE(randn({16}, {}, &g3).to_vector<float>(), std::vector<float>(one.begin(), one.begin() + 16));
  const auto ints = randint(3, 7, {1000}).to_vector<int64_t>();
  for (int64_t v : ints) EXPECT_TRUE(v >= 3 && v < 7);
}

TEST(Tensor, CastsRoundToNearestEven) {
  // 1 + 2^-8 is halfway between two bf16 values: ties go to the even one (1.0).
  const std::vector<float> v = {1.0f + 1.0f / 256, 1.0f + 3.0f / 256, -2.5f, 65504.0f * 2};
  Tensor b = from_vector(v, {4}).to(DType::BFloat16);
  EXPECT_EQ(b.to(DType::Float32).to_vector<float>(), (std::vector<float>{1.0f, 1.015625f, -2.5f, 131072.0f}));
  Tensor h = from_vector(v, {4}).to(DType::Float16).to(DType::Float32);
  EXPECT_EQ(h.to_vector<float>()[2], -2.5f);
  EXPECT_TRUE(std::isinf(h.to_vector<float>()[3]));
  EXPECT_EQ(from_vector<float>({1.7f, -2.2f}, {2}).to(DType::Int32).to_vector<int32_t>(), (std::vector<int32_t>{1, -2}));
}

TEST(Tensor, PrintsLikePyTorch) {
  Tensor a = from_vector<float>({1, 2.5, -3, 4}, {2, 2});
  const std::string s = a.str();
  EXPECT_NE(s.find("tensor([[ 1.0000,  2.5000],"), std::string::npos) << s;
  EXPECT_NE(s.find("shape=[2, 2], dtype=float32"), std::string::npos) << s;
  const std::string big = zeros({100, 100}).str();
  EXPECT_NE(big.find("..."), std::string::npos);
  EXPECT_LT(big.size(), 2000u);
  Tensor r = (a.to(DType::Float64).requires_grad_() * 2.0);
  EXPECT_NE(r.str().find("grad_fn=<mul>"), std::string::npos) << r.str();
}

TEST(Tensor, ItemAndVectorsRoundTrip) {
  const std::vector<int64_t> v = {5, -1, 7};
  EXPECT_EQ(from_vector(v, {3}).to_vector<int64_t>(), v);
  EXPECT_THROW(from_vector(v, {2}), Error);
  EXPECT_THROW(zeros({2}).item<float>(), Error);
  EXPECT_EQ(from_vector<double>({3.25}, {1, 1}).item<double>(), 3.25);
}

TEST(Tensor, DevicesParseAndCudaNeedsAGpu) {
  EXPECT_EQ(Device::parse("cuda:1"), Device::cuda(1));
  EXPECT_EQ(Device::parse("cpu").str(), "cpu");
  EXPECT_THROW(Device::parse("gpu"), Error);
  if (!cuda::is_available()) {
    GTEST_LOG_(INFO) << "no CUDA device: moving a tensor to cuda must raise a clear error";
    EXPECT_THROW(zeros({2}).to(Device::cuda(0)), Error);
  } else {
    Tensor a = arange(0, 10).to(Device::cuda(0));
    EXPECT_TRUE(a.is_cuda());
    EXPECT_EQ(a.to(Device::cpu()).to_vector<float>()[9], 9.0f);
  }
}

}  // namespace
}  // namespace uoe
