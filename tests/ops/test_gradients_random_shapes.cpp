// Finite-difference gradient checks (float64) on randomly drawn shapes: broadcasting pairs,
// matmul batches, reductions and row ops, several seeds each.
#include <gtest/gtest.h>

#include <random>

#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe::testing {
namespace {

using V = std::vector<Tensor>;

// A random shape of 1-3 dims with sizes in [1, 4], and a second shape that broadcasts with it
// (some dims set to 1, some leading dims dropped).
std::pair<Shape, Shape> broadcast_pair(std::mt19937& rng) {
  Shape a(1 + rng() % 3);
  for (auto& d : a) d = 1 + int64_t(rng() % 4);
  Shape b(a.begin() + int64_t(rng() % a.size()), a.end());
  for (auto& d : b)
    if (rng() % 3 == 0) d = 1;
  return rng() % 2 ? std::pair{a, b} : std::pair{b, a};
}

class RandomShapes : public ::testing::TestWithParam<int> {};

TEST_P(RandomShapes, BroadcastingArithmetic) {
  std::mt19937 rng(GetParam());
  auto [a, b] = broadcast_pair(rng);
  for (auto f : std::vector<std::pair<const char*, OpFn>>{
           {"mul", [](const V& x) { return x[0] * x[1]; }},
           {"sub", [](const V& x) { return x[0] - x[1]; }},
           {"div", [](const V& x) { return x[0] / (x[1] * x[1] + 1.0); }},
           {"where", [](const V& x) { return ops::where(ops::gt(x[0], x[1]), ops::tanh(x[0]), ops::exp(x[1])); }}}) {
    const GradCase c{std::string(f.first) + " " + shape_str(a) + " " + shape_str(b), {a, b}, f.second};
    EXPECT_EQ(check_gradients(c, Layout::Contiguous, GetParam()), "");
    EXPECT_EQ(check_gradients(c, Layout::Strided, GetParam() + 1), "");
  }
}

TEST_P(RandomShapes, MatmulWithBroadcastBatches) {
  std::mt19937 rng(GetParam() + 100);
  const int64_t M = 1 + rng() % 4, K = 1 + rng() % 4, N = 1 + rng() % 4, B = 1 + rng() % 3;
  Shape a = {B, M, K}, b = {K, N};
  if (rng() % 2) b = {1, K, N};
  if (rng() % 2) a = {M, K}, b = {B, K, N};
  const GradCase c{"matmul " + shape_str(a) + " " + shape_str(b), {a, b}, [](const V& x) { return ops::matmul(x[0], x[1]); }};
  EXPECT_EQ(check_gradients(c, Layout::Contiguous, GetParam()), "");
  EXPECT_EQ(check_gradients(c, Layout::Strided, GetParam() + 1), "");
}

TEST_P(RandomShapes, ReductionsAndRowOps) {
  std::mt19937 rng(GetParam() + 200);
  Shape s(2 + rng() % 2);
  for (auto& d : s) d = 1 + int64_t(rng() % 4);
  s.back() += 1;  // layer_norm of a single element has zero variance: its gradient is ill-conditioned
  const int64_t dim = int64_t(rng() % s.size());
  const int64_t last = s.back();
  for (auto f : std::vector<std::pair<const char*, GradCase>>{
           {"sum", {"", {s}, [dim](const V& x) { return ops::sum(x[0], {dim}, true); }}},
           {"mean", {"", {s}, [dim](const V& x) { return ops::mean(x[0], {dim}); }}},
           {"max", {"", {s}, [dim](const V& x) { return ops::max(x[0], dim); }}},
           {"softmax", {"", {s}, [dim](const V& x) { return ops::softmax(x[0], dim); }}},
           {"log_softmax", {"", {s}, [dim](const V& x) { return ops::log_softmax(x[0], dim); }}},
           {"rms_norm", {"", {s, {last}}, [](const V& x) { return ops::rms_norm(x[0], x[1]); }}},
           {"layer_norm", {"", {s, {last}, {last}}, [](const V& x) { return ops::layer_norm(x[0], x[1], x[2]); }}}}) {
    GradCase c = f.second;
    c.name = std::string(f.first) + " " + shape_str(s) + " dim " + std::to_string(dim);
    EXPECT_EQ(check_gradients(c, Layout::Contiguous, GetParam()), "");
    EXPECT_EQ(check_gradients(c, Layout::Strided, GetParam() + 1), "");
  }
}

INSTANTIATE_TEST_SUITE_P(Seeds, RandomShapes, ::testing::Range(1, 7));

}  // namespace
}  // namespace uoe::testing
