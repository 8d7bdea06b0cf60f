// custom_op: a lesson in writing your own differentiable op. Defines swiglu(a, b) = silu(a) ⊙ b as one fused op
// (a forward written as a plain loop, a backward node recorded into the autograd graph), checks its gradient with
// the library's exported checker (ops/gradcheck.h), and shows the checker catching a backward that forgets a term.
// Every printed number is checked by recomputation.
// Usage: custom_op [--quick]   (--quick runs the same lesson: it is small already)
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"
#include "ops/gradcheck.h"
#include "ops/ops.h"

#include "lesson.h"

using namespace uoe;
using namespace uoe::lesson;

namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// The backward of swiglu: the node autograd runs when a gradient g = dL/dy arrives. It returns dL/da and dL/db,
// in the order the inputs were recorded. silu'(a) = σ(a) (1 + a (1 − σ(a))); `forget_term` drops the
// "a (1 − σ(a))" part, the mistake the gradient check is there to catch.
struct SwigluBackward final : autograd::Node {
  bool forget_term;
  explicit SwigluBackward(bool forget) : forget_term(forget) {}
  std::string name() const override { return "swiglu"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const Tensor a = saved(0), b = saved(1), s = ops::sigmoid(a);
    const Tensor dsilu = forget_term ? s : s * (a * (1.0 - s) + 1.0);
    return {g * b * dsilu, g * (a * s)};
  }
};

// y = silu(a) ⊙ b, a and b of one shape (float64 here). The forward is whatever code computes y, here a loop;
// autograd::record then makes the backward node y's grad_fn (only when grad mode is on and an input needs grad),
// and the node saves what its backward reads.
Tensor swiglu(const Tensor& a, const Tensor& b, bool forget_term = false) {
  UOE_CHECK(a.shape() == b.shape(), "[swiglu] a ", shape_str(a.shape()), " and b ", shape_str(b.shape()),
            " must have one shape");
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> yv(av.size());
  for (size_t i = 0; i < av.size(); ++i) yv[i] = av[i] * sigmoid(av[i]) * bv[i];
  Tensor y = from_vector(yv, a.shape()).to(a.dtype());
  if (auto node = autograd::record<SwigluBackward>(y, {a, b}, forget_term)) node->save({a, b});
  return y;
}

void print_report(const char* what, const gradcheck::Report& r) {
  std::printf("%s: %s\n", what, r.summary().c_str());
}

}  // namespace

int main() {
  try {
    using V = std::vector<Tensor>;
    const Tensor a = from_vector<double>({-2.0, -0.5, 0.0, 0.5, 1.0, 2.5}, {2, 3}).requires_grad_();
    const Tensor b = from_vector<double>({1.5, -1.0, 2.0, 0.5, -2.0, 1.0}, {2, 3}).requires_grad_();
    show("a   [2, 3]", a);
    show("b   [2, 3]", b);

    title("1. Forward: the loop computes silu(a) ⊙ b");
    const Tensor y = swiglu(a, b);
    show("y = swiglu(a, b)   [2, 3]", y);
    std::printf("y's grad_fn: %s node, with %zu inputs (a and b)\n", y.grad_fn()->name().c_str(), y.grad_fn()->next.size());
    check_exact(y, ops::silu(a) * b, "y = silu(a) * b composed of library ops");

    title("2. Backward: the node's formulas, against the composed ops' autograd");
    ops::sum(y).backward();
    show("dL/da for L = sum(y): b σ(a) (1 + a (1 − σ(a)))   [2, 3]", a.grad());
    show("dL/db: silu(a)   [2, 3]", b.grad());
    const Tensor a2 = a.detach().requires_grad_(), b2 = b.detach().requires_grad_();
    ops::sum(ops::silu(a2) * b2).backward();
    check_exact(a.grad(), a2.grad(), "dL/da = the gradient autograd finds through ops::silu and ops::mul");
    check_exact(b.grad(), b2.grad(), "dL/db = the same through the composed ops");
    const double a4 = 1.0, b4 = -2.0, by_hand = b4 * sigmoid(a4) * (1 + a4 * (1 - sigmoid(a4)));
    std::printf("element [1, 1] by hand: b σ(a)(1 + a(1 − σ(a))) = %.1f · %.6f · (1 + %.1f · %.6f) = %.6f\n", b4,
                sigmoid(a4), a4, 1 - sigmoid(a4), by_hand);
    check_exact(a.grad().select(0, 1).select(0, 1), ops::scalar_like(by_hand, a), "dL/da[1, 1] by hand");

    title("3. The gradient checker: analytic gradient vs central differences, every element");
    // It differentiates sum(swiglu(a, b) * w), w fixed random weights, so every output element counts with its own
    // weight; each of the 12 input elements is moved by ±h = 1e-6 and (L(x + h) − L(x − h)) / 2h compared.
    const gradcheck::Report good = gradcheck::check_gradients([](const V& x) { return swiglu(x[0], x[1]); }, {a, b});
    print_report("correct backward", good);
    UOE_CHECK(good.passed && good.elements == 12, "the correct backward must pass on all 12 elements");

    title("4. A backward that forgets the a (1 − σ(a)) term");
    const gradcheck::Report bad =
        gradcheck::check_gradients([](const V& x) { return swiglu(x[0], x[1], true); }, {a, b});
    print_report("wrong backward", bad);
    UOE_CHECK(!bad.passed && bad.worst_input == 0, "the checker must fail the wrong backward, on input a");
    // What the wrong backward returns at the worst element is b σ(a) instead of b σ(a)(1 + a(1 − σ(a))): the
    // numeric derivative is the analytic one times (1 + a(1 − σ(a))) (times the weight w, the same on both).
    const std::vector<double> av = a.detach().to_vector<double>();
    const double aw = av[size_t(bad.worst_element)], factor = 1 + aw * (1 - sigmoid(aw));
    std::printf("worst element a = %.2f: numeric / analytic = %.6f = 1 + a (1 − σ(a)) = %.6f, the missing factor\n",
                aw, bad.worst_numeric / bad.worst_analytic, factor);
    UOE_CHECK(std::fabs(bad.worst_numeric / bad.worst_analytic - factor) < 1e-6,
              "numeric / analytic must be the forgotten factor");
    std::printf("(at a = 0 the forgotten term is 0, so that element passes: a check on one point could miss the bug)\n");

    std::printf("\nall checks passed\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_op FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
