// Tensor's autograd entry points declared in core/tensor.h: backward, gradient hooks and retain_grad. They live in
// the autograd layer because they reach the engine and Node; core holds only the per-tensor state they use.
#include "autograd/engine.h"
#include "autograd/node.h"
#include "core/error.h"
#include "core/tensor.h"

namespace uoe {

void Tensor::backward(const Tensor& grad, bool retain_graph) const {
  autograd::backward({*this}, {grad}, retain_graph);
}

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
