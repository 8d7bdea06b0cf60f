// ReferenceOps, elementwise and matmul: binary ops with broadcasting, where, sum_to, unary ops, matmul.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <string>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "ops/reference/reference_harness.h"
#include "unary_cases.h"

namespace uoe::reference {
namespace {

// a [..., M, K] (or [K]) times b [..., K, N] (or [K]) with broadcast batch dims.
Ref matmul_ref(const Ref& a_in, const Ref& b_in) {
  const Ref a = a_in.shape.size() == 1 ? reshaped(a_in, {1, a_in.shape[0]}) : a_in;
  const Ref b = b_in.shape.size() == 1 ? reshaped(b_in, {b_in.shape[0], 1}) : b_in;
  const int64_t M = a.shape.end()[-2], K = a.shape.back(), N = b.shape.back();
  Shape out_shape = broadcast(Shape(a.shape.begin(), a.shape.end() - 2), Shape(b.shape.begin(), b.shape.end() - 2));
  out_shape.push_back(M);
  out_shape.push_back(N);
  Ref out(out_shape);
  for_each_index(out_shape, [&](const Index& o) {
    // a and b at batch o and rows/cols (m, k) / (k, n): broadcast reads with the last two coordinates replaced
    Index ia = o, ib = o;
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) {
      ia.back() = k;
      ib.end()[-2] = k;
      Index ta(a.shape.size()), tb(b.shape.size());
      for (size_t d = 0; d < a.shape.size(); ++d) {
        const int64_t v = ia[ia.size() - a.shape.size() + d];
        ta[d] = (d + 2 < a.shape.size() && a.shape[d] == 1) ? 0 : v;
      }
      for (size_t d = 0; d < b.shape.size(); ++d) {
        const int64_t v = ib[ib.size() - b.shape.size() + d];
        tb[d] = (d + 2 < b.shape.size() && b.shape[d] == 1) ? 0 : v;
      }
      acc += a[ta] * b[tb];
    }
    out[o] = acc;
  });
  Shape s = out_shape;
  if (a_in.shape.size() == 1) s.erase(s.end() - 2);
  if (b_in.shape.size() == 1) s.pop_back();
  return reshaped(out, s);
}

using testing::kTanhA;
using testing::kTanhC;
using testing::sigmoid_ref;

// ==== tests ====

struct BinaryOp {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<double(double, double)> ref;
};

const std::vector<BinaryOp> kBinary = {
    {"add", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); }, [](double a, double b) { return a + b; }},
    {"sub", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); }, [](double a, double b) { return a - b; }},
    {"mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, [](double a, double b) { return a * b; }},
    {"div", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); }, [](double a, double b) { return a / b; }},
    {"pow", [](const Tensor& a, const Tensor& b) { return ops::pow(a, b); },
     [](double a, double b) { return std::pow(a, b); }},
    {"eq", [](const Tensor& a, const Tensor& b) { return ops::eq(a, b); },
     [](double a, double b) { return double(a == b); }},
    {"ne", [](const Tensor& a, const Tensor& b) { return ops::ne(a, b); },
     [](double a, double b) { return double(a != b); }},
    {"lt", [](const Tensor& a, const Tensor& b) { return ops::lt(a, b); },
     [](double a, double b) { return double(a < b); }},
    {"le", [](const Tensor& a, const Tensor& b) { return ops::le(a, b); },
     [](double a, double b) { return double(a <= b); }},
    {"gt", [](const Tensor& a, const Tensor& b) { return ops::gt(a, b); },
     [](double a, double b) { return double(a > b); }},
    {"ge", [](const Tensor& a, const Tensor& b) { return ops::ge(a, b); },
     [](double a, double b) { return double(a >= b); }},
};

TEST_F(ReferenceOps, BroadcastingBinaryOpsWhereAndSumTo) {
  for (const Case& c : all_cases()) {
    const int64_t n = c.n(), masks = int64_t(1) << n;
    // a: positive (pow), b: N(0, 1); size 1 in every subset of positions, and fewer dims
    std::vector<Input> as, bs, conds;
    for (int64_t m = 0; m < masks; ++m) {
      as.push_back(c.input(ones_at(c.shape, m), 10 + uint64_t(m), true));
      bs.push_back(c.in(next_layout(c.layout)).input(ones_at(c.shape, m), 30 + uint64_t(m)));
      conds.push_back(c.in(next_layout(c.layout, 2)).bool_input(ones_at(c.shape, m), 50 + uint64_t(m)));
    }
    auto check = [&](const Input& a, const Input& b, const Input& cond) {
      const std::string what = str(" ", shape_str(a.ref.shape), " and ", shape_str(b.ref.shape), " of ", c.name());
      for (const BinaryOp& op : kBinary)
        expect_matches(op.fn(a.t, b.t), binary_ref(a.ref, b.ref, op.ref), c.tol(), op.name + what);
      const Ref ab = binary_ref(a.ref, b.ref, [](double, double) { return 0.0; });
      Ref want(broadcast(cond.ref.shape, ab.shape));
      for_each_index(want.shape,
                     [&](const Index& i) { want[i] = cond.ref.bcast(i) != 0 ? a.ref.bcast(i) : b.ref.bcast(i); });
      expect_matches(ops::where(cond.t, a.t, b.t), want, 0, str("where cond ", shape_str(cond.ref.shape), what));
    };
    for (int64_t ma = 0; ma < masks; ++ma)
      for (int64_t mb = 0; mb < masks; ++mb) check(as[ma], bs[mb], conds[ma ^ mb]);
    for (int64_t k = 0; k < n; ++k) {  // b (then a) with only the last k dims
      const Shape tail(c.shape.end() - k, c.shape.end());
      const Input a = c.input(tail, 70 + uint64_t(k), true), b = c.input(tail, 80 + uint64_t(k));
      check(as[0], b, conds[0]);
      check(a, bs[0], conds[masks - 1]);
    }
    // sum_to: the inverse of broadcasting, to size-1 dims in every subset of positions and to fewer dims
    const Input x = c.input(c.shape, 90);
    for (int64_t m = 0; m < masks; ++m) {
      std::vector<bool> mask(n);
      for (int64_t d = 0; d < n; ++d) mask[d] = (m >> d) & 1;
      expect_matches(ops::sum_to(x.t, ones_at(c.shape, m)), reduce_ref(x.ref, mask, true, false), c.tol(),
                     str("sum_to ", shape_str(ones_at(c.shape, m)), " of ", c.name()));
    }
    for (int64_t k = 0; k < n; ++k) {
      std::vector<bool> mask(n, false);
      for (int64_t d = 0; d < n - k; ++d) mask[d] = true;
      const Shape tail(c.shape.end() - k, c.shape.end());
      expect_matches(ops::sum_to(x.t, tail), reduce_ref(x.ref, mask, false, false), c.tol(),
                     str("sum_to ", shape_str(tail), " of ", c.name()));
    }
  }
}

struct UnaryOp {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(double)> ref;
  bool positive = false;
};

const std::vector<UnaryOp> kScalarForms = {
    {"pow(x, 3)", [](const Tensor& x) { return ops::pow(x, 3.0); }, [](double x) { return x * x * x; }},
    {"pow(x, 0.5)", [](const Tensor& x) { return ops::pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, true},
    {"x * 2 - 1", [](const Tensor& x) { return x * 2.0 - 1.0; }, [](double x) { return x * 2 - 1; }},
    {"1 - x / 4", [](const Tensor& x) { return 1.0 - x / 4.0; }, [](double x) { return 1 - x / 4; }},
};

// The unary op rows (tests/unary_cases.h) and the scalar forms of the binary ops.
std::vector<UnaryOp> unary_ops() {
  std::vector<UnaryOp> rows;
  for (const testing::UnaryCase& u : testing::unary_cases()) rows.push_back({u.name, u.fn, u.ref, u.positive});
  rows.insert(rows.end(), kScalarForms.begin(), kScalarForms.end());
  return rows;
}

TEST_F(ReferenceOps, ElementwiseOnEveryLayout) {
  for (const Case& c : all_cases()) {
    const Input x = c.input(c.shape), xp = c.input(c.shape, 1, true), g = c.in(next_layout(c.layout)).input(c.shape, 2);
    for (const UnaryOp& op : unary_ops()) {
      const Input& in = op.positive ? xp : x;
      Ref want(c.shape);
      for (size_t k = 0; k < want.v.size(); ++k) want.v[k] = op.ref(in.ref.v[k]);
      expect_matches(op.fn(in.t), want, c.tol(), str(op.name, " of ", c.name()));
    }
    // the fused derivatives g * f'(x)
    const auto gelu_d = [](double v) {
      return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-v * v / 2) / std::sqrt(2 * std::numbers::pi);
    };
    const auto gelu_tanh_d = [](double v) {
      const double t = std::tanh(kTanhC * (v + kTanhA * v * v * v));
      return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * kTanhC * (1 + 3 * kTanhA * v * v);
    };
    const auto silu_d = [](double v) { return sigmoid_ref(v) * (1 + v * (1 - sigmoid_ref(v))); };
    const auto derivative = [&](const std::function<double(double)>& f) {
      Ref want(c.shape);
      for (size_t k = 0; k < want.v.size(); ++k) want.v[k] = g.ref.v[k] * f(x.ref.v[k]);
      return want;
    };
    expect_matches(ops::gelu_backward(x.t, g.t, false), derivative(gelu_d), c.tol(), "gelu_backward of " + c.name());
    expect_matches(ops::gelu_backward(x.t, g.t, true), derivative(gelu_tanh_d), c.tol(),
                   "gelu_backward tanh of " + c.name());
    expect_matches(ops::silu_backward(x.t, g.t), derivative(silu_d), c.tol(), "silu_backward of " + c.name());
  }
}

TEST_F(ReferenceOps, MatmulWithBroadcastBatchesOnEveryLayout) {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3, 4, 5}, {2, 3, 5, 6}},
                                                       {{2, 1, 4, 5}, {3, 5, 6}},
                                                       {{4, 5}, {3, 2, 5, 6}},
                                                       {{3, 4, 5}, {1, 5, 6}},
                                                       {{3, 4, 5}, {5, 2}},
                                                       {{2, 3, 4, 5}, {1, 3, 5, 2}},
                                                       {{3, 4, 5}, {5}},
                                                       {{5}, {2, 5, 3}},
                                                       {{1, 4, 5}, {3, 1, 5, 2}},
                                                       {{4, 5}, {5, 3}},
                                                       {{5}, {5}}};
  for (const Case& c : all_cases({{1}}))
    for (const auto& [sa, sb] : shapes) {
      const Input a = c.input(sa, 1), b = c.in(next_layout(c.layout)).input(sb, 2);
      expect_matches(ops::matmul(a.t, b.t), matmul_ref(a.ref, b.ref), c.tol(),
                     str("matmul ", shape_str(sa), " ", layout_name(c.layout), " x ", shape_str(sb), " ",
                         layout_name(next_layout(c.layout)), " ", dtype_name(c.dtype)));
    }
}

}  // namespace
}  // namespace uoe::reference
