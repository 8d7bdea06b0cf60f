// The exported gradient checker (ops/gradcheck.h) itself: it passes a correct backward, fails a wrong one and
// says where, and reports an input that receives no gradient.
#include "ops/gradcheck.h"

#include <gtest/gtest.h>

#include "autograd/node.h"
#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe::testing {
namespace {

using V = std::vector<Tensor>;

// y = x², with a backward that forgets the factor 2 (dy/dx = x instead of 2x) unless `correct`.
struct SquareBackward final : autograd::Node {
  bool correct;
  explicit SquareBackward(bool c) : correct(c) {}
  std::string name() const override { return "square"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {g * saved(0) * (correct ? 2.0 : 1.0)}; }
};

Tensor square(const Tensor& x, bool correct) {
  Tensor y;
  {
    NoGradGuard no_grad;
    y = x * x;
  }
  if (auto node = autograd::record<SquareBackward>(y, {x}, correct)) node->save({x});
  return y;
}

TEST(GradCheckHelper, PassesACorrectBackward) {
  const gradcheck::Report r = gradcheck::check_gradients(
      [](const V& x) { return ops::silu(x[0]) * x[1]; }, {random_double({3, 4}, 1), random_double({4}, 2)});
  EXPECT_TRUE(r.passed) << r.summary();
  EXPECT_EQ(r.elements, 16);
  EXPECT_LT(r.max_rel_error, 1e-8);
  EXPECT_LE(r.max_rel_error, r.max_abs_error);
  expect_has(r.summary(), "passed");
}

TEST(GradCheckHelper, FailsAWrongBackwardAndNamesTheWorstElement) {
  // Element 2 is the largest in magnitude: the missing half of 2x is largest there.
  const Tensor x = from_vector<double>({0.5, -1.0, 3.0, 0.25}, {4});
  const gradcheck::Report wrong = gradcheck::check_gradients([](const V& v) { return square(v[0], false); }, {x});
  EXPECT_FALSE(wrong.passed);
  EXPECT_EQ(wrong.worst_input, 0);
  EXPECT_EQ(wrong.worst_element, 2);
  EXPECT_NEAR(wrong.worst_numeric, 2 * wrong.worst_analytic, 1e-6);
  EXPECT_GT(wrong.max_abs_error, 0.1);
  expect_has(wrong.summary(), "FAILED");
  expect_has(wrong.summary(), "element 2");
  const gradcheck::Report right = gradcheck::check_gradients([](const V& v) { return square(v[0], true); }, {x});
  EXPECT_TRUE(right.passed) << right.summary();
  EXPECT_EQ(x.to_vector<double>()[2], 3.0) << "the caller's tensor must be left as it was";
}

// The tables' wrapper (tests/gradcheck.h) goes through the same checker, on strided inputs too.
TEST(GradCheckHelper, TheTestTablesWrapperFailsAWrongBackward) {
  const GradCase wrong{"square_wrong", {{2, 3}}, [](const V& v) { return square(v[0], false); }};
  const GradCase right{"square", {{2, 3}}, [](const V& v) { return square(v[0], true); }};
  for (Layout layout : {Layout::Contiguous, Layout::Strided}) {
    const std::string msg = check_gradients(wrong, layout, 5);
    expect_has(msg, "square_wrong");
    expect_has(msg, "FAILED");
    EXPECT_EQ(check_gradients(right, layout, 5), "");
  }
  expect_has(check_gradients(wrong, Layout::Strided, 5), "(strided)");
}

TEST(GradCheckHelper, ReportsAnInputWithoutGradient) {
  const gradcheck::Report r = gradcheck::check_gradients([](const V& x) { return x[0] * 2.0; },
                                                         {random_double({3}, 1), random_double({3}, 2)});
  EXPECT_FALSE(r.passed);
  expect_has(r.summary(), "input 1 received no gradient");
}

TEST(GradCheckHelper, RefusesAnIntegerInput) {
  const Tensor i = from_vector<int64_t>({1, 2}, {2}, TensorOptions{}.with_dtype(DType::Int64));
  expect_error([&] { gradcheck::check_gradients([](const V& x) { return x[0]; }, {i}); },
               {"gradcheck::check_gradients", "input 0", "floating", "int64"});
}

}  // namespace
}  // namespace uoe::testing
