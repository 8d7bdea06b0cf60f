// Tensor's autograd entry points declared in core/tensor.h (backward, gradient hooks, retain_grad) and ops::backward:
// the op layer's facade over the autograd engine, which it hands the ops' arithmetic (autograd/gradient_math.h).
#include <cmath>

#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/error.h"
#include "core/tensor.h"
#include "ops/backward.h"

namespace uoe {
namespace {

Tensor add(const Tensor& a, const Tensor& b) { return a + b; }
Tensor clone(const Tensor& t) { return t.clone(); }

bool all_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return true;
  const std::vector<double> v = t.to(DType::Float64).to_vector<double>();
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}

constexpr autograd::GradientMath kGradientMath{add, clone, full, all_finite};

}  // namespace

void ops::backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph) {
  autograd::backward(roots, grads, retain_graph, kGradientMath);
}

void Tensor::backward(const Tensor& grad, bool retain_graph) const { ops::backward({*this}, {grad}, retain_graph); }

void Tensor::register_hook(GradHook hook) const {
  UOE_CHECK(requires_grad(), "[register_hook] cannot register a hook on a tensor that does not require grad");
  if (is_leaf())
    impl().autograd.leaf_hooks.push_back(std::move(hook));
  else
    grad_fn()->pre_hooks.push_back(std::move(hook));
}

void Tensor::retain_grad() const {
  UOE_CHECK(requires_grad(), "[retain_grad] cannot retain the grad of a tensor that does not require grad");
  if (is_leaf() || retains_grad()) return;
  impl().autograd.retains_grad = true;
  std::weak_ptr<TensorImpl> weak = impl_;
  grad_fn()->pre_hooks.push_back([weak](const Tensor& g) {
    if (auto p = weak.lock()) {
      Tensor self(p);
      Tensor old = self.grad();
      self.set_grad(old.defined() ? old + g : g.clone());
    }
    return Tensor();
  });
}

}  // namespace uoe
