// The CPU's elementwise, reduce and index kernels on bfloat16 storage (ops/cpu/bf16_compute.h): every op on
// bfloat16 tensors gives, bit for bit, what the float32 route gives (cast the same values up, run the op, round
// once), and lies within bfloat16 rounding of the float64 value. Odd sizes (1, 15, 17, 33, 1000: the vector body and
// its tail), contiguous, strided (transposed) and broadcast operands. The vectorised loops run the ISA picked at load
// time (AVX-512 here); strided operands take the loops' scalar branch.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"
#include "unary_cases.h"

namespace uoe::testing {
namespace {

const std::vector<int64_t> kSizes = {1, 15, 17, 33, 1000};

// Random bfloat16 values of `shape` (N(0, scale²), or |N| + 0.1 when positive).
Tensor random_bf16(const Shape& shape, Generator& g, bool positive = false, double scale = 2.0) {
  Tensor x = randn(shape, {}, &g) * scale;
  if (positive) x = ops::abs(x) + 0.1;
  return x.to(DType::BFloat16);
}

// got and want hold the same bits (any NaN matches any NaN).
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  const Tensor a = got.contiguous(), b = want.contiguous();
  const auto* pa = static_cast<const uint16_t*>(a.raw_data());
  const auto* pb = static_cast<const uint16_t*>(b.raw_data());
  int64_t bad = 0, first = -1;
  for (int64_t i = 0; i < a.numel(); ++i) {
    const bool nan_a = (pa[i] & 0x7fff) > 0x7f80, nan_b = (pb[i] & 0x7fff) > 0x7f80;
    if (nan_a && nan_b) continue;
    if (pa[i] != pb[i] && first < 0) first = i;
    bad += pa[i] != pb[i];
  }
  EXPECT_EQ(bad, 0) << what << ": first difference at " << first << " of " << a.numel();
}

// The float32 route of f on bfloat16 inputs: the same values in float32, the result rounded to bfloat16.
Tensor via_f32(const std::function<Tensor(const std::vector<Tensor>&)>& f, const std::vector<Tensor>& in) {
  std::vector<Tensor> up;
  for (const Tensor& t : in) up.push_back(t.to(DType::Float32));
  const Tensor y = f(up);
  return y.dtype() == DType::Float32 ? y.to(DType::BFloat16) : y;
}

// The operand layouts of a [3, n] input: contiguous, a transposed view, a row broadcast along dim 0, and a column
// broadcast along dim 1 (each row one value: the elementwise loops' stride-0 inner loop, as in a fill).
std::vector<std::pair<std::string, Tensor>> layouts(int64_t n, Generator& g, bool positive) {
  const Tensor t = random_bf16({n, 3}, g, positive);
  return {{"contiguous", random_bf16({3, n}, g, positive)},
          {"transposed", t.mT()},
          {"broadcast", random_bf16({1, n}, g, positive).expand({3, n})},
          {"column broadcast", random_bf16({3, 1}, g, positive).expand({3, n})}};
}

TEST(CpuBf16Elementwise, UnaryMatchesFloat32RouteBitForBitAndFloat64) {
  Generator g(20);
  for (const UnaryCase& u : unary_cases())
    for (int64_t n : kSizes)
      for (const auto& [layout, x] : layouts(n, g, u.positive)) {
        const std::string what = std::string(u.name) + " n=" + std::to_string(n) + " " + layout;
        const Tensor y = u.fn(x);
        ASSERT_EQ(y.dtype(), DType::BFloat16) << what;
        expect_same_bits(y, via_f32([&](const std::vector<Tensor>& v) { return u.fn(v[0]); }, {x}), what);
        const std::vector<float> xs = x.to(DType::Float32).contiguous().to_vector<float>();
        const std::vector<float> ys = y.to(DType::Float32).contiguous().to_vector<float>();
        for (size_t i = 0; i < xs.size(); ++i) {
          const double want = u.ref(xs[i]);
          ASSERT_NEAR(ys[i], want, std::fabs(want) / 128 + 1e-6) << what << " at x = " << xs[i];
        }
      }
}

TEST(CpuBf16Elementwise, ActivationGradientsMatchFloat32Route) {
  Generator g(21);
  const std::vector<std::pair<std::string, std::function<Tensor(const std::vector<Tensor>&)>>> grads = {
      {"gelu", [](const std::vector<Tensor>& v) { return ops::gelu_backward(v[0], v[1], false); }},
      {"gelu_tanh", [](const std::vector<Tensor>& v) { return ops::gelu_backward(v[0], v[1], true); }},
      {"silu", [](const std::vector<Tensor>& v) { return ops::silu_backward(v[0], v[1]); }}};
  for (const auto& [name, f] : grads)
    for (int64_t n : kSizes)
      for (const auto& [layout, x] : layouts(n, g, false)) {
        const std::vector<Tensor> in = {x, random_bf16({3, n}, g)};
        expect_same_bits(f(in), via_f32(f, in), name + " n=" + std::to_string(n) + " " + layout);
      }
}

TEST(CpuBf16Elementwise, BinaryAndCompareMatchFloat32Route) {
  Generator g(22);
  using F = std::function<Tensor(const std::vector<Tensor>&)>;
  const std::vector<std::pair<std::string, F>> binaries = {
      {"add", [](const std::vector<Tensor>& v) { return v[0] + v[1]; }},
      {"sub", [](const std::vector<Tensor>& v) { return v[0] - v[1]; }},
      {"mul", [](const std::vector<Tensor>& v) { return v[0] * v[1]; }},
      {"div", [](const std::vector<Tensor>& v) { return v[0] / v[1]; }},
      {"pow", [](const std::vector<Tensor>& v) { return ops::pow(ops::abs(v[0]), v[1]); }},
      {"scalar", [](const std::vector<Tensor>& v) { return v[0] * 0.375; }},  // a 0-d operand, exact in bfloat16
      {"lt", [](const std::vector<Tensor>& v) { return ops::lt(v[0], v[1]); }},
      {"eq", [](const std::vector<Tensor>& v) { return ops::eq(v[0], v[0].mT().mT()); }},
      {"ge", [](const std::vector<Tensor>& v) { return ops::ge(v[0], v[1]); }}};
  for (const auto& [name, f] : binaries)
    for (int64_t n : kSizes)
      for (const auto& [layout, a] : layouts(n, g, false))
        for (const Shape& b_shape : {Shape{3, n}, Shape{n}, Shape{3, 1}}) {
          const std::vector<Tensor> in = {a, random_bf16(b_shape, g)};
          const std::string what = name + " n=" + std::to_string(n) + " a " + layout + " b " + shape_str(b_shape);
          const Tensor y = f(in), want = via_f32(f, in);
          if (want.dtype() == DType::Bool) {
            EXPECT_EQ(y.to(DType::Int64).to_vector<int64_t>(), want.to(DType::Int64).to_vector<int64_t>()) << what;
          } else {
            expect_same_bits(y, want, what);
          }
        }
}

TEST(CpuBf16Elementwise, InPlaceUpdatesMatchFloat32Route) {
  Generator g(23);
  NoGradGuard no_grad;
  for (int64_t n : kSizes)
    for (const Shape& other_shape : {Shape{3, n}, Shape{n}}) {
      const std::string what = "n=" + std::to_string(n) + " other " + shape_str(other_shape);
      const Tensor self = random_bf16({3, n}, g), other = random_bf16(other_shape, g);
      Tensor added = self.clone(), scaled = self.clone(), multiplied = self.clone();
      added.add_(other);
      scaled.add_(other, -0.375);  // other * alpha is rounded to bfloat16 first
      multiplied.mul_(other);
      expect_same_bits(added, via_f32([](const std::vector<Tensor>& v) { return v[0] + v[1]; }, {self, other}),
                       "add_ " + what);
      expect_same_bits(scaled,
                       via_f32([](const std::vector<Tensor>& v) { return v[0] + (v[1] * -0.375).to(DType::BFloat16).to(DType::Float32); },
                               {self, other}),
                       "add_ alpha " + what);
      expect_same_bits(multiplied, via_f32([](const std::vector<Tensor>& v) { return v[0] * v[1]; }, {self, other}),
                       "mul_ " + what);
      Tensor strided = random_bf16({n, 3}, g).mT();  // an in-place target that is itself a strided view
      const Tensor before = strided.clone();
      strided.add_(other);
      expect_same_bits(strided, via_f32([](const std::vector<Tensor>& v) { return v[0] + v[1]; }, {before, other}),
                       "add_ into a transposed view " + what);
    }
}

// Sums of every layout the kernel distinguishes: row sums (last dim; one chunk and several chunks of 8192), column
// sums (first dim; one and several chunks of 256 rows), all elements, a middle dim.
TEST(CpuBf16Reduce, SumMatchesFloat32RouteAndFloat64) {
  Generator g(24);
  const std::vector<std::pair<Shape, Shape>> cases = {
      {{1}, {0}},         {{15}, {0}},      {{17, 33}, {1}},   {{17, 33}, {0}},     {{1000, 17}, {0}},
      {{3, 20000}, {1}},  {{33, 1000}, {}}, {{5, 15, 7}, {1}}, {{600, 33}, {0}},    {{4, 1000, 3}, {0, 2}}};
  for (const auto& [shape, dims] : cases)
    for (bool transposed : {false, true}) {
      const std::string what = shape_str(shape) + " over " + shape_str(dims) + (transposed ? " transposed" : "");
      Tensor x = random_bf16(shape, g);
      if (transposed && x.dim() >= 2) x = x.mT().contiguous().mT();
      const auto sum = [&](const std::vector<Tensor>& v) { return ops::sum(v[0], dims, false); };
      const Tensor y = sum({x});
      ASSERT_EQ(y.dtype(), DType::BFloat16) << what;
      expect_same_bits(y, via_f32(sum, {x}), what);
      const std::vector<double> want = ops::sum(x.to(DType::Float64), dims, false).reshape({-1}).to_vector<double>();
      const std::vector<float> got = y.to(DType::Float32).reshape({-1}).to_vector<float>();
      const std::vector<double> mag = ops::sum(ops::abs(x.to(DType::Float64)), dims, false).reshape({-1}).to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], std::fabs(want[i]) / 128 + mag[i] * 1e-5) << what << " output " << i;
    }
}

// index_add / scatter_add sum in float32 (in index order, the float32 route's order) and round once; gather
// copies.
TEST(CpuBf16Index, IndexAddScatterAddGatherMatchFloat32Route) {
  Generator g(25);
  for (int64_t n : kSizes) {
    const std::string what = "n=" + std::to_string(n);
    const int64_t rows = 7, m = 2 * n + 1;  // repeated destinations
    const Tensor x = random_bf16({rows, n}, g), src = random_bf16({m, n}, g);
    const Tensor index = randint(0, rows, {m}, {.dtype = DType::Int64}, &g);
    const auto add_rows = [&](const std::vector<Tensor>& v) { return ops::index_add(v[0], 0, index, v[1]); };
    expect_same_bits(add_rows({x, src}), via_f32(add_rows, {x, src}), "index_add dim 0 " + what);
    const Tensor cols = random_bf16({3, m}, g), target = random_bf16({3, rows}, g);
    const auto add_cols = [&](const std::vector<Tensor>& v) { return ops::index_add(v[0], 1, index, v[1]); };
    expect_same_bits(add_cols({target, cols}), via_f32(add_cols, {target, cols}), "index_add dim 1 " + what);

    const Tensor where = randint(0, rows, {rows + 5, n}, {.dtype = DType::Int64}, &g);
    const Tensor values = random_bf16({rows + 5, n}, g);
    const auto scatter = [&](const std::vector<Tensor>& v) { return ops::scatter_add(v[0], 0, where, v[1]); };
    expect_same_bits(scatter({x, values}), via_f32(scatter, {x, values}), "scatter_add dim 0 " + what);
    const Tensor along = randint(0, n, {rows, 2 * n}, {.dtype = DType::Int64}, &g);
    const Tensor more = random_bf16({rows, 2 * n}, g).mT().contiguous().mT();  // a strided source
    const auto scatter1 = [&](const std::vector<Tensor>& v) { return ops::scatter_add(v[0], 1, along, v[1]); };
    expect_same_bits(scatter1({x, more}), via_f32(scatter1, {x, more}), "scatter_add dim 1 " + what);
    const auto gather = [&](const std::vector<Tensor>& v) { return ops::gather(v[0], 1, along.narrow(1, 0, n)); };
    expect_same_bits(gather({x}), via_f32(gather, {x}), "gather " + what);
  }
}

}  // namespace
}  // namespace uoe::testing
