// Activation checkpointing: a packed no-grad forward, recomputed with grad in backward.
#include "nn/activation_checkpoint.h"

#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backward.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

using Function = std::function<std::vector<Tensor>(const Tensor&)>;

// Every output flattened and concatenated: [Σ numel]
Tensor pack(const std::vector<Tensor>& outputs) {
  std::vector<Tensor> flat;
  for (const Tensor& t : outputs) flat.push_back(t.reshape({t.numel()}));
  return ops::cat(flat, 0);
}

struct CheckpointBackward final : autograd::Node {
  Function f;
  std::vector<Shape> shapes;  // of the outputs, in packing order
  CheckpointBackward(Function fn, std::vector<Shape> s) : f(std::move(fn)), shapes(std::move(s)) {}
  std::string name() const override { return "checkpoint"; }
  std::vector<Tensor> apply(const Tensor& grad) override {
    Tensor x = saved(0).detach().requires_grad_();
    std::vector<Tensor> roots, grads;
    {
      const bool was = autograd::grad_enabled();
      autograd::set_grad_enabled(true);
      const std::vector<Tensor> outputs = f(x);
      autograd::set_grad_enabled(was);
      UOE_CHECK(outputs.size() == shapes.size(), "[checkpoint] the recomputation returned ", outputs.size(),
                " outputs, the forward ", shapes.size());
      int64_t offset = 0;
      for (size_t i = 0; i < outputs.size(); ++i) {
        UOE_CHECK(outputs[i].shape() == shapes[i], "[checkpoint] recomputed output ", i, " has shape ",
                  shape_str(outputs[i].shape()), ", the forward's ", shape_str(shapes[i]));
        const int64_t n = outputs[i].numel();
        if (outputs[i].requires_grad()) {
          roots.push_back(outputs[i]);
          grads.push_back(grad.narrow(0, offset, n).reshape(shapes[i]).contiguous());
        }
        offset += n;
      }
    }
    if (!roots.empty()) ops::backward(roots, grads);
    return {x.grad().defined() ? x.grad() : zeros_like(x)};
  }
};

}  // namespace

std::vector<Tensor> checkpoint(const Function& f, const Tensor& x) {
  if (!autograd::grad_enabled() || !x.requires_grad()) return f(x);
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = f(x);
  }
  std::vector<Shape> shapes;
  for (const Tensor& t : outputs) {
    UOE_CHECK(t.dtype() == x.dtype() && t.device() == x.device(), "[checkpoint] an output is ", dtype_name(t.dtype()),
              " on ", t.device().str(), ": outputs must have the input's dtype (", dtype_name(x.dtype()), ") and device");
    shapes.push_back(t.shape());
  }
  Tensor packed = pack(outputs);  // [Σ numel]
  auto node = autograd::record<CheckpointBackward>(packed, {x}, f, shapes);
  node->save({x});
  // Views of the packed buffer, each differentiable back into it
  std::vector<Tensor> views;
  int64_t offset = 0;
  for (const Shape& s : shapes) {
    const int64_t n = shape_numel(s);
    views.push_back(packed.narrow(0, offset, n).view(s));
    offset += n;
  }
  return views;
}

}  // namespace uoe::nn
