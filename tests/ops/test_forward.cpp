// Forward values: hand-computed cases, naive references (GEMM vs triple loop), and thread-count independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>

#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe {
namespace {

using testing::random_double;
const TensorOptions kF64 = TensorOptions{}.with_dtype(DType::Float64);
const TensorOptions kI64 = TensorOptions{}.with_dtype(DType::Int64);

void expect_close(const Tensor& a, const std::vector<double>& want, double tol = 1e-6) {
  const auto got = a.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

// C = A B by a triple loop in double, A [M, K], B [K, N] contiguous.
std::vector<double> naive_matmul(const std::vector<double>& a, const std::vector<double>& b, int64_t M, int64_t K, int64_t N) {
  std::vector<double> c(size_t(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) c[size_t(i * N + j)] += a[size_t(i * K + k)] * b[size_t(k * N + j)];
  return c;
}

TEST(Forward, MatmulMatchesTripleLoopOnOddSizes) {
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {17, 33, 65}, {0, 4, 3}, {3, 0, 5}, {64, 129, 31}, {200, 70, 300}}) {
    const Tensor a = random_double({M, K}, 1), b = random_double({K, N}, 2);
    const auto want = naive_matmul(a.to_vector<double>(), b.to_vector<double>(), M, K, N);
    expect_close(ops::matmul(a, b), want, 1e-10);
    // float32, and operands stored transposed (absorbed by the GEMM's packing)
    expect_close(ops::matmul(a.to(DType::Float32), b.to(DType::Float32)), want, 1e-3 * std::sqrt(double(K) + 1));
    expect_close(ops::matmul(a.mT().contiguous().mT(), b.mT().contiguous().mT()), want, 1e-10);
  }
}

TEST(Forward, BatchedMatmulBroadcasts) {
  const Tensor a = random_double({2, 1, 3, 4}, 3), b = random_double({5, 4, 2}, 4);
  const Tensor c = ops::matmul(a, b);
  ASSERT_EQ(c.shape(), (Shape{2, 5, 3, 2}));
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      const auto want = naive_matmul(a.select(0, i).select(0, 0).contiguous().to_vector<double>(),
                                     b.select(0, j).contiguous().to_vector<double>(), 3, 4, 2);
      expect_close(c.select(0, i).select(0, j), want, 1e-12);
    }
}

TEST(Forward, ElementwiseHandValues) {
  const Tensor x = from_vector<double>({-1.0, 0.0, 1.0}, {3}, kF64);
  expect_close(ops::relu(x), {0, 0, 1});
  expect_close(ops::sigmoid(x), {0.2689414213699951, 0.5, 0.7310585786300049}, 1e-12);
  expect_close(ops::silu(x), {-0.2689414213699951, 0.0, 0.7310585786300049}, 1e-12);
  expect_close(ops::gelu(x), {-0.15865525393145707, 0.0, 0.8413447460685429}, 1e-12);
  expect_close(ops::gelu(x, true), {-0.15880800939172324, 0.0, 0.8411919906082768}, 1e-12);
  expect_close(ops::tanh(x), {-0.7615941559557649, 0.0, 0.7615941559557649}, 1e-12);
  expect_close(ops::exp(x), {std::exp(-1.0), 1.0, std::exp(1.0)}, 1e-12);
  expect_close(ops::abs(x), {1, 0, 1});
  expect_close(ops::pow(x + 2.0, 2.0), {1, 4, 9}, 1e-12);
  expect_close(ops::rsqrt(x + 2.0), {1, 1 / std::sqrt(2.0), 1 / std::sqrt(3.0)}, 1e-12);
  // float32 vectorised math agrees with double on a wide range
  const Tensor w = random_double({4096}, 5) * 6.0;
  for (auto f : {ops::exp, ops::tanh, ops::sigmoid, ops::silu}) {
    const auto a = f(w.to(DType::Float32)).to_vector<double>(), b = f(w).to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6 * (1 + std::fabs(b[i])));
  }
}

TEST(Forward, ComparisonsAndWhere) {
  const Tensor a = from_vector<float>({1, 2, 3}, {3}), b = from_vector<float>({3, 2, 1}, {3});
  EXPECT_EQ(ops::lt(a, b).to_vector<bool>(), (std::vector<bool>{true, false, false}));
  EXPECT_EQ(ops::ge(a, b).to_vector<bool>(), (std::vector<bool>{false, true, true}));
  EXPECT_EQ(ops::eq(a, b).to_vector<bool>(), (std::vector<bool>{false, true, false}));
  EXPECT_EQ(ops::where(ops::gt(a, b), a, b).to_vector<float>(), (std::vector<float>{3, 2, 3}));
}

TEST(Forward, Reductions) {
  const Tensor x = from_vector<float>({1, 5, 3, 4, 2, 6}, {2, 3});
  EXPECT_EQ(ops::sum(x, {1}).to_vector<float>(), (std::vector<float>{9, 12}));
  EXPECT_EQ(ops::sum(x, {0}, true).shape(), (Shape{1, 3}));
  EXPECT_EQ(ops::mean(x).item<float>(), 3.5f);
  EXPECT_EQ(ops::max(x, 1).to_vector<float>(), (std::vector<float>{5, 6}));
  EXPECT_EQ(ops::min(x, 0).to_vector<float>(), (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(ops::argmax(x, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(ops::max(x).item<float>(), 6.0f);
  // max and argmax over every dim of a 4-D tensor: the other dims keep their order in the result
  const Shape shape = {3, 2, 4, 2};
  const Tensor cube = random_double(shape, 7);
  const std::vector<double> v = cube.to_vector<double>();
  const Shape strides = contiguous_strides(shape);
  for (int64_t dim = 0; dim < 4; ++dim) {
    const std::vector<double> got = ops::max(cube, dim).to_vector<double>();
    const std::vector<int64_t> at = ops::argmax(cube, dim).to_vector<int64_t>();
    size_t out = 0;
    for (int64_t i = 0; i < shape_numel(shape); ++i) {  // result order: every element with index 0 along dim
      if ((i / strides[size_t(dim)]) % shape[size_t(dim)] != 0) continue;
      int64_t best = 0;
      for (int64_t j = 1; j < shape[size_t(dim)]; ++j)
        if (v[size_t(i + j * strides[size_t(dim)])] > v[size_t(i + best * strides[size_t(dim)])]) best = j;
      EXPECT_EQ(got[out], v[size_t(i + best * strides[size_t(dim)])]) << "dim " << dim << " at " << out;
      EXPECT_EQ(at[out], best) << "dim " << dim << " at " << out;
      ++out;
    }
  }
  EXPECT_EQ(ops::sum(ops::gt(x, ops::scalar_like(2.5, x))).item<int64_t>(), 4);
  // a long row sums in fixed chunks: compare with double
  const Tensor big = random_double({3, 100003}, 6);
  expect_close(ops::sum(big.to(DType::Float32), {1}), ops::sum(big, {1}).to_vector<double>(), 1e-2);
  expect_close(ops::sum(big.to(DType::Float32), {0}), ops::sum(big, {0}).to_vector<double>(), 1e-4);
}

TEST(Forward, LongColumnSumsKeepFloat32Accuracy) {
  // Sums over dim 0 of [R, K] (also every broadcast backward's sum_to) run down the columns in fixed row chunks:
  // one running float sum per column over 2^20 rows was ~1e-5 off; now as close as a row sum.
  const Tensor x = random_double({1 << 20, 3}, 11, true).to(DType::Float32);  // [2^20, 3] in [0.5, 2)
  const auto got = ops::sum(x, {0}).to_vector<double>(), want = ops::sum(x.to(DType::Float64), {0}).to_vector<double>();
  for (size_t k = 0; k < 3; ++k) EXPECT_LT(std::fabs(got[k] - want[k]) / want[k], 1e-6) << "column " << k;
  const auto mean = ops::mean(x, {0}).to_vector<double>();
  for (size_t k = 0; k < 3; ++k) EXPECT_NEAR(mean[k], want[k] / double(1 << 20), 1e-6) << "column " << k;
}

TEST(Forward, SoftmaxCrossEntropyNormsHandValues) {
  expect_close(ops::softmax(from_vector<double>({0.0, std::log(2.0)}, {1, 2}, kF64)), {1.0 / 3, 2.0 / 3}, 1e-12);
  expect_close(ops::log_softmax(from_vector<double>({0.0, 0.0}, {2}, kF64)), {-std::log(2.0), -std::log(2.0)}, 1e-12);
  // large logits stay finite
  expect_close(ops::softmax(from_vector<float>({1000, 1000}, {2})), {0.5, 0.5});
  const Tensor logits = from_vector<double>({0, 0, 1, 2, 3, 4}, {3, 2}, kF64);
  const double want = (std::log(2.0) + (std::log(std::exp(1.0) + std::exp(2.0)) - 2.0)) / 2;  // row 2 ignored
  EXPECT_NEAR(ops::cross_entropy(logits, from_vector<int64_t>({0, 1, -100}, {3}, kI64)).item<double>(), want, 1e-12);
  const double r = std::sqrt((9.0 + 16.0) / 2);
  expect_close(ops::rms_norm(from_vector<double>({3, 4}, {1, 2}, kF64), from_vector<double>({1, 2}, {2}, kF64), 0.0),
               {3 / r, 8 / r}, 1e-12);
  const double s = std::sqrt(2.0 / 3 + 1e-5);
  expect_close(ops::layer_norm(from_vector<double>({1, 2, 3}, {3}, kF64), Tensor(), Tensor(), 1e-5), {-1 / s, 0, 1 / s},
               1e-12);
}

TEST(Forward, CrossEntropyOfReducedFloatLogitsIsAFloat32Loss) {
  // bfloat16 logits: the loss in float32 from the very values of the logits, the gradient back in bfloat16.
  const Tensor l16 = random_double({6, 11}, 9).to(DType::BFloat16).requires_grad_();
  const Tensor l32 = l16.detach().to(DType::Float32).requires_grad_();
  const Tensor t = from_vector<int64_t>({3, 0, -100, 10, 5, 5}, {6}, kI64);
  const Tensor y16 = ops::cross_entropy(l16, t), y32 = ops::cross_entropy(l32, t);
  EXPECT_EQ(y16.dtype(), DType::Float32);
  EXPECT_EQ(y16.item<float>(), y32.item<float>());
  y16.backward();
  y32.backward();
  EXPECT_EQ(l16.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(l16.grad().to_vector<float>(), l32.grad().to(DType::BFloat16).to_vector<float>());
}

TEST(Forward, RopeRotatesPairsByPosition) {
  // Dh = 2, positions 0 and 1: angle = position (the base does not matter for i = 0)
  const Tensor x = from_vector<double>({1, 2, 1, 2}, {1, 2, 1, 2}, kF64);
  expect_close(ops::rope(x), {1, 2, std::cos(1.0) - 2 * std::sin(1.0), std::sin(1.0) + 2 * std::cos(1.0)}, 1e-12);
}

// y[b, t, h, i] = x[i] cos a - x[i + Dh/2] sin a (and the pair's other half), a = (t + offset) base^(-2i/Dh), sin
// negated for the inverse rotation (the backward).
std::vector<double> rotated(const Tensor& x, double base, int64_t offset, bool inverse) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), Dh = x.size(3), h = Dh / 2;
  const std::vector<double> v = x.to_vector<double>();
  std::vector<double> y(v.size());
  for (int64_t r = 0; r < B * T * H; ++r) {
    const int64_t t = r / H % T;
    for (int64_t i = 0; i < h; ++i) {
      const double a = double(t + offset) * std::pow(base, -2.0 * double(i) / double(Dh));
      const double c = std::cos(a), s = inverse ? -std::sin(a) : std::sin(a);
      const double lo = v[size_t(r * Dh + i)], hi = v[size_t(r * Dh + h + i)];
      y[size_t(r * Dh + i)] = lo * c - hi * s;
      y[size_t(r * Dh + h + i)] = lo * s + hi * c;
    }
  }
  return y;
}

TEST(Forward, RopeRotatesEveryShapeBaseAndOffsetForwardAndBack) {
  // Twelve argument sets, twice round (a kernel that kept its angle tables must still give each call its own).
  struct Case {
    Shape shape;
    double base;
    int64_t offset;
  };
  std::vector<Case> cases;
  for (const Shape& shape : {Shape{2, 5, 3, 8}, Shape{1, 7, 2, 8}, Shape{1, 5, 2, 4}})
    for (double base : {10000.0, 500.0})
      for (int64_t offset : {0, 3}) cases.push_back({shape, base, offset});
  for (int round = 0; round < 2; ++round)
    for (size_t k = 0; k < cases.size(); ++k) {
      const Case& c = cases[k];
      SCOPED_TRACE("case " + std::to_string(k) + " round " + std::to_string(round));
      const Tensor x = random_double(c.shape, 40 + k).requires_grad_();
      const Tensor w = random_double(c.shape, 60 + k);
      const Tensor y = ops::rope(x, c.base, c.offset);
      expect_close(y, rotated(x, c.base, c.offset, false), 1e-12);
      ops::sum(y * w).backward();  // the gradient is w rotated back
      expect_close(x.grad(), rotated(w, c.base, c.offset, true), 1e-12);
    }
}

TEST(Forward, IndexingHandValues) {
  const Tensor x = from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
  EXPECT_EQ(ops::gather(x, 1, from_vector<int64_t>({2, 0, 1, 1}, {2, 2})).to_vector<float>(),
            (std::vector<float>{3, 1, 5, 5}));
  EXPECT_EQ(ops::scatter_add(zeros({2, 3}), 1, from_vector<int64_t>({2, 2, 0, 1}, {2, 2}), ones({2, 2})).to_vector<float>(),
            (std::vector<float>{0, 0, 2, 1, 1, 0}));
  EXPECT_EQ(ops::index_select(x, 1, from_vector<int64_t>({2, 2}, {2})).to_vector<float>(),
            (std::vector<float>{3, 3, 6, 6}));
  EXPECT_EQ(ops::index_add(zeros({3}), 0, from_vector<int64_t>({1, 1, 0}, {3}), from_vector<float>({1, 2, 4}, {3}))
                .to_vector<float>(),
            (std::vector<float>{4, 3, 0}));
  auto [v, i] = ops::topk(from_vector<float>({3, 1, 3, 7}, {4}), 3);
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{7, 3, 3}));
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{3, 0, 2}));
  EXPECT_EQ(ops::topk(from_vector<float>({3, 1, 3, 7}, {4}), 2, 0, false).second.to_vector<int64_t>(),
            (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(ops::embedding(x, from_vector<int64_t>({1}, {1, 1})).shape(), (Shape{1, 1, 3}));
  auto parts = ops::split(ops::cat({x, x * 2.0}, 0), std::vector<int64_t>{3, 1}, 0);
  EXPECT_EQ(parts[1].to_vector<float>(), (std::vector<float>{8, 10, 12}));
  EXPECT_EQ(ops::stack({x, x}, 2).shape(), (Shape{2, 3, 2}));
}

TEST(Forward, DropoutKeepsExpectationAndIsSeeded) {
  Generator g1(3), g2(3);
  const Tensor x = ones({100000});
  const Tensor a = ops::dropout(x, 0.25, true, &g1), b = ops::dropout(x, 0.25, true, &g2);
  EXPECT_EQ(a.to_vector<float>(), b.to_vector<float>());
  EXPECT_NEAR(ops::mean(a).item<float>(), 1.0, 0.01);
  const auto v = a.to_vector<float>();
  for (float e : v) EXPECT_TRUE(e == 0.0f || std::fabs(e - 1.0f / 0.75f) < 1e-6f);
  EXPECT_EQ(ops::dropout(x, 0.5, false).to_vector<float>(), x.to_vector<float>());
}

TEST(Forward, ReducedPrecisionComputesInFloat32) {
  const Tensor x = random_double({64, 32}, 7).to(DType::Float32);
  for (DType t : {DType::BFloat16, DType::Float16}) {
    const Tensor y = ops::softmax(ops::matmul(x.to(t), x.to(t).mT()));
    EXPECT_EQ(y.dtype(), t);
    const auto a = y.to_vector<float>(), b = ops::softmax(ops::matmul(x, x.mT())).to_vector<float>();
    double err = 0, norm = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      err += (a[i] - b[i]) * (a[i] - b[i]);
      norm += b[i] * b[i];
    }
    EXPECT_LT(std::sqrt(err / norm), t == DType::BFloat16 ? 0.05 : 0.01);
  }
}

TEST(Forward, ResultsDoNotDependOnThreadCount) {
  const Tensor a = random_double({300, 257}, 8).to(DType::Float32), b = random_double({257, 190}, 9).to(DType::Float32);
  const Tensor q = random_double({2, 4, 130, 32}, 10).to(DType::Float32);
  const Tensor tall = random_double({70001, 3}, 12).to(DType::Float32);  // column sums over many row chunks
  auto run = [&] {
    std::vector<std::vector<float>> r;
    r.push_back(ops::matmul(a, b).to_vector<float>());
    r.push_back(ops::sum(a, {0}).to_vector<float>());
    r.push_back(ops::sum(tall, {0}).to_vector<float>());
    r.push_back(ops::sum(a).to_vector<float>());
    r.push_back(ops::softmax(a).to_vector<float>());
    r.push_back(ops::rms_norm(a, Tensor()).to_vector<float>());
    r.push_back(ops::scaled_dot_product_attention(q, q, q).to_vector<float>());
    return r;
  };
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run();
  omp_set_num_threads(2);
  const auto two = run();
  omp_set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(one[i], two[i]) << "case " << i;
}

}  // namespace
}  // namespace uoe
