// Binary arithmetic with broadcasting (add, sub, mul, div, pow) and the Tensor operators: forward and backward.
#include <cmath>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/bf16_views.h"
#include "ops/kernels/elementwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

using kernels::BinaryKind;

Tensor run_binary(const char* op, BinaryKind kind, const Tensor& a, const Tensor& b) {
  check_binary(op, a, b);
  const Tensor ac = elementwise_view(a), bc = elementwise_view(b);
  return restore_dtype(UOE_KERNEL(ac, binary(kind, ac, bc)), a.dtype());
}

// Gradients of a binary op as functions of (a, b, g); each is summed back to its input's shape.
struct BinaryBackward final : autograd::Node {
  using Formula = Tensor (*)(const Tensor& a, const Tensor& b, const Tensor& g);
  const char* op;
  Formula da, db;
  Shape a_shape, b_shape;
  BinaryBackward(const char* o, Formula fa, Formula fb, Shape sa, Shape sb)
      : op(o), da(fa), db(fb), a_shape(std::move(sa)), b_shape(std::move(sb)) {}
  std::string name() const override { return op; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const Tensor a = saved(0), b = saved(1);
    return {next[0] ? sum_to(da(a, b, g), a_shape) : Tensor(), next[1] ? sum_to(db(a, b, g), b_shape) : Tensor()};
  }
};

Tensor binary_op(const char* op, BinaryKind kind, const Tensor& a, const Tensor& b, BinaryBackward::Formula da,
                 BinaryBackward::Formula db, bool save_inputs) {
  Tensor y = run_binary(op, kind, a, b);
  if (auto node = autograd::record<BinaryBackward>(y, {a, b}, op, da, db, a.shape(), b.shape())) {
    if (save_inputs)
      node->save({a, b});
    else
      node->save({Tensor(), Tensor()});
  }
  return y;
}

}  // namespace

Tensor scalar_like(double value, const Tensor& t) {
  UOE_CHECK(!is_integral(t.dtype()) || value == std::trunc(value), "[scalar] ", value, " with an integer tensor ",
            describe(t), " would be truncated to ", std::trunc(value), "; convert the tensor to a floating dtype first");
  return full({}, value, TensorOptions{}.with_dtype(t.dtype()).with_device(t.device()));
}

Tensor add(const Tensor& a, const Tensor& b) {
  return binary_op("add", BinaryKind::Add, a, b, [](const Tensor&, const Tensor&, const Tensor& g) { return g; },
                   [](const Tensor&, const Tensor&, const Tensor& g) { return g; }, false);
}
Tensor sub(const Tensor& a, const Tensor& b) {
  return binary_op("sub", BinaryKind::Sub, a, b, [](const Tensor&, const Tensor&, const Tensor& g) { return g; },
                   [](const Tensor&, const Tensor&, const Tensor& g) { return neg(g); }, false);
}
Tensor mul(const Tensor& a, const Tensor& b) {
  return binary_op("mul", BinaryKind::Mul, a, b, [](const Tensor&, const Tensor& b, const Tensor& g) { return g * b; },
                   [](const Tensor& a, const Tensor&, const Tensor& g) { return g * a; }, true);
}
Tensor div(const Tensor& a, const Tensor& b) {  // d(a/b)/db = -a / b^2
  if (is_integral(b.dtype()))  // a hardware trap on the CPU, garbage on a GPU: one error instead
    UOE_CHECK(sum(eq(b, scalar_like(0.0, b)).to(DType::Int64)).item<int64_t>() == 0, "[div] integer division by ",
              "zero: the divisor ", describe(b), " holds zeros");
  return binary_op("div", BinaryKind::Div, a, b, [](const Tensor&, const Tensor& b, const Tensor& g) { return g / b; },
                   [](const Tensor& a, const Tensor& b, const Tensor& g) { return neg(g * a / (b * b)); }, true);
}
Tensor pow(const Tensor& a, const Tensor& b) {  // d a^b = b a^(b-1) da + a^b log(a) db
  check_floating("pow", "a", a);
  // At a = 0 the formulas give 0·inf: the limits are taken instead, as PyTorch does (da = 0 where b = 0; db = 0
  // where a = 0 and b >= 0).
  return binary_op(
      "pow", BinaryKind::Pow, a, b,
      [](const Tensor& a, const Tensor& b, const Tensor& g) {
        const Tensor zero = scalar_like(0.0, b);
        return where(eq(b, zero), zeros_like(g), g * b * pow(a, b - 1.0));
      },
      [](const Tensor& a, const Tensor& b, const Tensor& g) {
        const Tensor zero = scalar_like(0.0, a), grad = g * pow(a, b) * log(a);
        return where(eq(a, zero), where(ge(b, zero), zeros_like(grad), grad), grad);
      },
      true);
}
Tensor pow(const Tensor& a, double exponent) { return pow(a, scalar_like(exponent, a)); }

}  // namespace uoe::ops

namespace uoe {

Tensor operator+(const Tensor& a, const Tensor& b) { return ops::add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return ops::sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return ops::mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return ops::div(a, b); }
Tensor operator+(const Tensor& a, double b) { return ops::add(a, ops::scalar_like(b, a)); }
Tensor operator-(const Tensor& a, double b) { return ops::sub(a, ops::scalar_like(b, a)); }
Tensor operator*(const Tensor& a, double b) { return ops::mul(a, ops::scalar_like(b, a)); }
Tensor operator/(const Tensor& a, double b) { return ops::div(a, ops::scalar_like(b, a)); }
Tensor operator*(double a, const Tensor& b) { return ops::mul(ops::scalar_like(a, b), b); }
Tensor operator-(double a, const Tensor& b) { return ops::sub(ops::scalar_like(a, b), b); }
Tensor operator-(const Tensor& a) { return ops::neg(a); }

}  // namespace uoe
