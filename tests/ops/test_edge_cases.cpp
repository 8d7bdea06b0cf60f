// Edge cases found by review, each once a crash, a hardware trap or a silently wrong value: dims of 0-dim
// tensors, integer division, NaN in topk, norms over no rows, in-place writes through overlapping views, pow's
// gradient at 0, fractional scalars with integer tensors, dropout's scale in bfloat16, scatter_add's dims, NaN
// through relu and the sign of abs(-0).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "gradcheck.h"
#include "core/rng.h"
#include "ops/ops.h"

namespace uoe {
namespace {

using testing::expect_error;

const TensorOptions kI64 = TensorOptions{}.with_dtype(DType::Int64);
const TensorOptions kF64 = TensorOptions{}.with_dtype(DType::Float64);

TEST(EdgeCases, ZeroDimTensorsHaveNoDimsToName) {
  const Tensor s = scalar_tensor(3.0);
  const char* no_dims = "a 0-dim tensor has no dims";
  expect_error([&] { ops::sum(s, {0}); }, {"[sum]", no_dims});
  expect_error([&] { ops::cat({s, s}, 0); }, {"[cat]", no_dims});
  expect_error([&] { s.transpose(0, -1); }, {"[transpose]", no_dims});
  expect_error([&] { s.squeeze(0); }, {"[squeeze]", no_dims});
  expect_error([&] { s.select(0, 0); }, {"[select]", no_dims});
  expect_error([&] { s.narrow(0, 0, 1); }, {"[narrow]", no_dims});
  expect_error([&] { ops::index_select(s, 0, zeros({1}, kI64)); }, {"[index_select]", no_dims});
  expect_error([&] { ops::softmax(s, 0); }, {"[softmax]", no_dims});
  EXPECT_EQ(ops::sum(s).item<float>(), 3.0f);  // a reduction over every dim still works
  EXPECT_EQ(s.unsqueeze(0).shape(), (Shape{1}));
}

TEST(EdgeCases, IntegerDivisionByZeroIsAnErrorAndMinOverMinusOneWraps) {
  expect_error([] { ops::div(from_vector<int64_t>({1, 2}, {2}), from_vector<int64_t>({0, 1}, {2})); },
               {"[div] integer division by zero", "int64[2]"});
  const int64_t lo = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(ops::div(from_vector<int64_t>({lo, 7}, {2}), from_vector<int64_t>({-1, -2}, {2})).to_vector<int64_t>(),
            (std::vector<int64_t>{lo, -3}));
}

TEST(EdgeCases, TopkCountsNanAsTheLargestValue) {
  const Tensor x = from_vector<float>({1, NAN, 3, 2}, {4});
  auto [v, i] = ops::topk(x, 2, -1, true);
  EXPECT_TRUE(std::isnan(v.to_vector<float>()[0]));
  EXPECT_EQ(v.to_vector<float>()[1], 3.0f);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  auto [sv, si] = ops::topk(x, 2, -1, false);
  EXPECT_EQ(sv.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_EQ(si.to_vector<int64_t>(), (std::vector<int64_t>{0, 3}));
}

TEST(EdgeCases, NormsOverNoRowsGiveZeroParameterGradients) {
  for (bool layer : {false, true}) {
    { const Tensor poison = full({1 << 12}, NAN); }  // a freed block the gradients may be carved from
    const Tensor x = zeros({0, 4}, TensorOptions{}.with_requires_grad(true));
    const Tensor w = ones({4}, TensorOptions{}.with_requires_grad(true));
    const Tensor b = zeros({4}, TensorOptions{}.with_requires_grad(true));
    const Tensor y = layer ? ops::layer_norm(x, w, b, 1e-5) : ops::rms_norm(x, w, 1e-5);
    ops::sum(y).backward();
    EXPECT_EQ(w.grad().to_vector<float>(), std::vector<float>(4, 0.0f)) << (layer ? "layer_norm" : "rms_norm");
    if (layer) {
      EXPECT_EQ(b.grad().to_vector<float>(), std::vector<float>(4, 0.0f));
    }
  }
}

TEST(EdgeCases, InPlaceWritesThroughOverlappingViews) {
  Tensor base = ones({3});
  expect_error([&] { base.expand({4, 3}).add_(ones({4, 3})); }, {"[add_]", "expanded view", "overlap"});
  EXPECT_EQ(base.to_vector<float>(), std::vector<float>(3, 1.0f));
  // x[1:] += x[:-1] reads the old x[:-1], as out of place: [1, 2, 2, 2], not a running sum
  Tensor x = ones({4});
  x.narrow(0, 1, 3).add_(x.narrow(0, 0, 3));
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 2, 2}));
  Tensor y = arange(0, 4).to(DType::Float32);
  y.narrow(0, 1, 3).copy_(y.narrow(0, 0, 3));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{0, 0, 1, 2}));
  x.add_(x);  // the very same view is fine
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{2, 4, 4, 4}));
}

TEST(EdgeCases, PowGradientAtZeroTakesTheLimits) {
  const Tensor a = zeros({3}, TensorOptions{}.with_dtype(DType::Float64).with_requires_grad(true));
  Tensor b = from_vector<double>({0, 2, 0.5}, {3});
  b.requires_grad_(true);
  ops::sum(ops::pow(a, b)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0, 0, INFINITY}));  // b a^(b-1): 0 where b = 0
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));         // a^b log a: 0 at a = 0
}

TEST(EdgeCases, FractionalScalarsWithIntegerTensorsAreRefused) {
  const Tensor i = from_vector<int64_t>({3, 5}, {2});
  expect_error([&] { i * 0.5; }, {"[scalar] 0.5 with an integer tensor", "would be truncated to 0"});
  EXPECT_EQ((i * 2.0).to_vector<int64_t>(), (std::vector<int64_t>{6, 10}));
}

TEST(EdgeCases, DropoutScalesBfloat16InFloat32AndRoundsOnce) {
  manual_seed(5);
  const Tensor x = randn({4096}).to(DType::BFloat16);
  const Tensor y = ops::dropout(x, 0.1, true).to(DType::Float32);
  const std::vector<float> xs = x.to(DType::Float32).to_vector<float>(), ys = y.to_vector<float>();
  const std::vector<float> want = (x.to(DType::Float32) * (1.0 / 0.9)).to(DType::BFloat16).to(DType::Float32)
                                      .to_vector<float>();
  int kept = 0;
  for (size_t k = 0; k < xs.size(); ++k)
    if (ys[k] != 0.0f || xs[k] == 0.0f) {
      ++kept;
      ASSERT_EQ(ys[k], want[k]) << k;
    }
  EXPECT_NEAR(kept / 4096.0, 0.9, 0.03);
}

TEST(EdgeCases, ScatterAddNeedsMatchingDims) {
  expect_error([] { ops::scatter_add(zeros({4, 4}), 0, zeros({2, 2}, kI64), zeros({4})); },
               {"[scatter_add] src [4] and index [2, 2] must have the same number of dims"});
}

TEST(EdgeCases, ReluKeepsNaNAndAbsOfNegativeZeroIsPositive) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> v = {nan, -0.0, -2.5, 1.75, -std::numeric_limits<double>::infinity()};
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16}) {
    const Tensor x = from_vector(v, {5}, kF64).to(t).requires_grad_();
    const Tensor y = ops::relu(x);
    const auto r = y.to_vector<double>();
    EXPECT_TRUE(std::isnan(r[0])) << dtype_name(t) << ": relu(NaN) is " << r[0];
    EXPECT_EQ(r[2], 0.0);
    EXPECT_EQ(r[3], 1.75);
    // as PyTorch's threshold_backward (grad where not y <= 0): the gradient passes at NaN
    y.backward(from_vector<double>({0.5, 0.25, 2.0, -3.0, 1.0}, {5}, kF64).to(t));
    EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0.5, 0.0, 0.0, -3.0, 0.0})) << dtype_name(t);
    const auto a = ops::abs(x.detach()).to_vector<double>();
    EXPECT_TRUE(std::isnan(a[0]));
    EXPECT_FALSE(std::signbit(a[1])) << dtype_name(t) << ": abs(-0) is -0";
    EXPECT_EQ(a[2], 2.5);
    EXPECT_EQ(a[4], std::numeric_limits<double>::infinity());
  }
  const Tensor i = from_vector<int64_t>({-3, 0, 4}, {3}, kI64);
  EXPECT_EQ(ops::abs(i).to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 4}));
  EXPECT_EQ(ops::relu(i).to_vector<int64_t>(), (std::vector<int64_t>{0, 0, 4}));
}

}  // namespace
}  // namespace uoe
