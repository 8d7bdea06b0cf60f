// Finite-difference gradient checks: analytical backward vs central differences, in float64.
#include "gradcheck.h"

#include <gtest/gtest.h>

#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "ops/gradcheck.h"
#include "ops/ops.h"

namespace uoe::testing {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "missing: " << part << "\nin: " << text;
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const std::string msg = error_of(f);
  ASSERT_FALSE(msg.empty()) << "expected an error containing " << parts[0];
  for (const auto& p : parts) expect_has(msg, p);
}

double max_abs_diff(const Tensor& a, const Tensor& b) {
  const auto u = a.to(DType::Float64).to_vector<double>(), v = b.to(DType::Float64).to_vector<double>();
  double m = 0;
  for (size_t i = 0; i < u.size(); ++i) m = std::max(m, std::fabs(u[i] - v[i]));
  return m;
}

void expect_fused_equals_composed(const std::vector<Shape>& shapes, const OpFn& fused, const OpFn& composed,
                                  double tol, uint64_t seed) {
  auto make = [&] {
    std::vector<Tensor> xs;
    for (size_t i = 0; i < shapes.size(); ++i) xs.push_back(random_double(shapes[i], seed + i).requires_grad_());
    return xs;
  };
  std::vector<Tensor> a = make(), b = make();
  const Tensor ya = fused(a), yb = composed(b);
  ASSERT_EQ(ya.shape(), yb.shape());
  const Tensor w = random_double(ya.shape(), seed + 999);
  ops::sum(ya * w).backward();
  ops::sum(yb * w).backward();
  EXPECT_LT(max_abs_diff(ya, yb), tol) << "forward";
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].grad().defined() && b[i].grad().defined()) << "no gradient for input " << i;
    EXPECT_LT(max_abs_diff(a[i].grad(), b[i].grad()), tol) << "gradient of input " << i;
  }
}

Tensor random_double(const Shape& shape, uint64_t seed, bool positive) {
  Generator g(seed);
  const TensorOptions f64 = TensorOptions{}.with_dtype(DType::Float64);
  if (positive) return rand(shape, f64, &g) * 1.5 + 0.5;
  return randn(shape, f64, &g);
}

void PrintTo(const GradCase& c, std::ostream* os) { *os << c.name; }

std::string check_gradients(const GradCase& c, Layout layout, uint64_t seed, double tol) {
  // The leaves the checker perturbs; the op sees them as they are, or as step-2 slices of leaves twice as wide.
  std::vector<Tensor> leaves;
  std::vector<bool> strided;
  for (size_t i = 0; i < c.shapes.size(); ++i) {
    Shape leaf_shape = c.shapes[i];
    strided.push_back(layout == Layout::Strided && !leaf_shape.empty());
    if (strided.back()) leaf_shape.back() *= 2;
    leaves.push_back(random_double(leaf_shape, seed + 17 * i, c.positive));
  }
  auto fn = [&](const std::vector<Tensor>& xs) {
    std::vector<Tensor> views;
    for (size_t i = 0; i < xs.size(); ++i) views.push_back(strided[i] ? xs[i].slice(-1, 0, xs[i].size(-1), 2) : xs[i]);
    return c.fn(views);
  };
  const gradcheck::Report report = gradcheck::check_gradients(fn, leaves, {.tolerance = tol, .seed = seed + 999});
  if (report.passed) return "";
  return c.name + (layout == Layout::Strided ? " (strided)" : "") + ": " + report.summary();
}

}  // namespace uoe::testing
