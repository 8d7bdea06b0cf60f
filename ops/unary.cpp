// Unary elementwise ops (neg, exp, log, sqrt, rsqrt, abs, sign, tanh, sigmoid, relu, gelu, silu, softplus): forward and
// backward.
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/bf16_views.h"
#include "ops/kernels/elementwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

using kernels::UnaryKind;

// Runs a unary kernel, computing reduced floats in float32.
Tensor run_unary(const char* op, UnaryKind kind, const Tensor& x) {
  check_same_device(op, {x});
  const Tensor xc = elementwise_view(x);
  return restore_dtype(UOE_KERNEL(xc, unary(kind, xc)), x.dtype());
}

Tensor run_float_unary(const char* op, UnaryKind kind, const Tensor& x) {
  check_floating(op, "x", x);
  return run_unary(op, kind, x);
}

// One Node type for every unary op: the gradient is a function of the input x, the output y
// and the incoming grad g, written with other ops.
struct UnaryBackward final : autograd::Node {
  using Formula = Tensor (*)(const Tensor& x, const Tensor& y, const Tensor& g);
  const char* op;
  Formula formula;
  UnaryBackward(const char* o, Formula f) : op(o), formula(f) {}
  std::string name() const override { return op; }
  std::vector<Tensor> apply(const Tensor& g) override { return {formula(saved(0), saved(1), g)}; }
};

Tensor unary_op(const char* op, UnaryKind kind, const Tensor& x, UnaryBackward::Formula formula, bool float_only = true) {
  Tensor y = float_only ? run_float_unary(op, kind, x) : run_unary(op, kind, x);
  if (auto node = autograd::record<UnaryBackward>(y, {x}, op, formula)) node->save({x, y});
  return y;
}

}  // namespace

Tensor neg(const Tensor& x) {
  return unary_op("neg", UnaryKind::Neg, x, [](const Tensor&, const Tensor&, const Tensor& g) { return neg(g); }, false);
}
Tensor exp(const Tensor& x) {
  return unary_op("exp", UnaryKind::Exp, x, [](const Tensor&, const Tensor& y, const Tensor& g) { return g * y; });
}
Tensor log(const Tensor& x) {
  return unary_op("log", UnaryKind::Log, x, [](const Tensor& x, const Tensor&, const Tensor& g) { return g / x; });
}
Tensor sqrt(const Tensor& x) {  // d sqrt(x) = 1 / (2 sqrt(x))
  return unary_op("sqrt", UnaryKind::Sqrt, x, [](const Tensor&, const Tensor& y, const Tensor& g) { return g / (y * 2.0); });
}
Tensor rsqrt(const Tensor& x) {  // d x^-1/2 = -1/2 x^-3/2 = -1/2 y^3
  return unary_op("rsqrt", UnaryKind::Rsqrt, x,
                  [](const Tensor&, const Tensor& y, const Tensor& g) { return g * (y * y * y) * -0.5; });
}
Tensor abs(const Tensor& x) {
  return unary_op("abs", UnaryKind::Abs, x, [](const Tensor& x, const Tensor&, const Tensor& g) { return g * sign(x); }, false);
}
Tensor sign(const Tensor& x) { return run_unary("sign", UnaryKind::Sign, x); }
Tensor tanh(const Tensor& x) {  // d tanh = 1 - y^2
  return unary_op("tanh", UnaryKind::Tanh, x, [](const Tensor&, const Tensor& y, const Tensor& g) { return g * (1.0 - y * y); });
}
Tensor sigmoid(const Tensor& x) {  // d sigmoid = y (1 - y)
  return unary_op("sigmoid", UnaryKind::Sigmoid, x,
                  [](const Tensor&, const Tensor& y, const Tensor& g) { return g * (y * (1.0 - y)); });
}
Tensor relu(const Tensor& x) {  // the gradient passes where x is NaN, as PyTorch's threshold_backward
  return unary_op("relu", UnaryKind::Relu, x,
                  [](const Tensor& x, const Tensor&, const Tensor& g) { return where(le(x, scalar_like(0, x)), scalar_like(0, g), g); },
                  false);
}
Tensor gelu(const Tensor& x, bool tanh_approximation) {
  if (tanh_approximation)
    return unary_op("gelu_tanh", UnaryKind::GeluTanh, x,
                    [](const Tensor& x, const Tensor&, const Tensor& g) { return gelu_backward(x, g, true); });
  return unary_op("gelu", UnaryKind::Gelu, x,
                  [](const Tensor& x, const Tensor&, const Tensor& g) { return gelu_backward(x, g, false); });
}
Tensor silu(const Tensor& x) {
  return unary_op("silu", UnaryKind::Silu, x, [](const Tensor& x, const Tensor&, const Tensor& g) { return silu_backward(x, g); });
}
Tensor softplus(const Tensor& x) {  // d softplus = sigmoid(x)
  return unary_op("softplus", UnaryKind::Softplus, x,
                  [](const Tensor& x, const Tensor&, const Tensor& g) { return g * sigmoid(x); });
}

Tensor gelu_backward(const Tensor& x, const Tensor& g, bool tanh_approximation) {
  check_same_device("gelu_backward", {x, g});
  check_same_dtype("gelu_backward", x, g);
  const auto kind = tanh_approximation ? kernels::ActivationGrad::GeluTanh : kernels::ActivationGrad::Gelu;
  const Tensor xc = elementwise_view(x), gc = elementwise_view(g);
  return restore_dtype(UOE_KERNEL(xc, activation_grad(kind, xc, gc)), x.dtype());
}

Tensor silu_backward(const Tensor& x, const Tensor& g) {
  check_same_device("silu_backward", {x, g});
  check_same_dtype("silu_backward", x, g);
  const Tensor xc = elementwise_view(x), gc = elementwise_view(g);
  return restore_dtype(UOE_KERNEL(xc, activation_grad(kernels::ActivationGrad::Silu, xc, gc)), x.dtype());
}

}  // namespace uoe::ops
