// Module bookkeeping.
#include "nn/module.h"

#include "autograd/grad_mode.h"
#include "core/error.h"

namespace uoe::nn {
namespace {

// Replaces t's data with `src` (same shape) while keeping the handle and its autograd identity.
void replace_data(const Tensor& t, const Tensor& src) {
  TensorImpl* impl = t.unsafe_impl();
  impl->storage = src.storage();
  impl->shape = src.shape();
  impl->strides = src.strides();
  impl->offset = src.offset();
  impl->dtype = src.dtype();
  impl->autograd.grad.reset();
}

}  // namespace

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  Tensor p = t.detach();
  p.requires_grad_(true);
  params_.emplace_back(name, p);
  return p;
}

void Module::collect(const std::string& prefix, NamedTensors& out) const {
  for (const auto& [name, t] : params_) out.emplace_back(prefix + name, t);
  for (const auto& [name, child] : children_) child->collect(prefix + name + ".", out);
}

NamedTensors Module::named_parameters() const {
  NamedTensors out;
  collect("", out);
  return out;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [name, t] : named_parameters()) out.push_back(t);
  return out;
}

std::map<std::string, Tensor> Module::state_dict() const {
  std::map<std::string, Tensor> out;
  for (auto& [name, t] : named_parameters()) out[name] = t;
  return out;
}

void Module::load_state_dict(const std::map<std::string, Tensor>& state, bool strict, const std::string& source) {
  const std::string where = "[load_state_dict] " + (source.empty() ? "" : source + ": ");
  const auto mine = state_dict();
  if (strict)
    for (const auto& [name, t] : state)
      UOE_CHECK(mine.count(name), where, "unexpected tensor '", name, "' (shape ", shape_str(t.shape()),
                ") that the model does not have");
  NoGradGuard no_grad;
  for (const auto& [name, t] : mine) {
    auto it = state.find(name);
    if (it == state.end()) {
      UOE_CHECK(!strict, where, "missing tensor '", name, "' of shape ", shape_str(t.shape()));
      continue;
    }
    UOE_CHECK(it->second.shape() == t.shape(), where, "tensor '", name, "' has shape ",
              shape_str(it->second.shape()), " but the model expects ", shape_str(t.shape()));
    UOE_CHECK(!is_floating(t.dtype()) || is_floating(it->second.dtype()), where, "tensor '", name, "' is ",
              dtype_name(it->second.dtype()), " but the model's is ", dtype_name(t.dtype()),
              ": weights must be floating-point");
    Tensor(t).copy_(it->second.to(t.device()));
  }
}

int64_t Module::num_parameters() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [name, child] : children_) child->train(on);
}

void Module::to(Device device) {
  NoGradGuard no_grad;
  for (auto& [name, t] : params_) replace_data(t, t.to(device));
  for (auto& [name, child] : children_) child->to(device);
}

void Module::to(DType dtype) {
  NoGradGuard no_grad;
  for (auto& [name, t] : params_) replace_data(t, t.to(dtype));
  for (auto& [name, child] : children_) child->to(dtype);
}

void Module::replace_parameter(const Tensor& param, const Tensor& value) {
  bool mine = false;
  for (const auto& [name, t] : params_) mine = mine || t.is_same(param);
  UOE_CHECK(mine, "[replace_parameter] the tensor is not a parameter registered by this module");
  NoGradGuard no_grad;
  replace_data(param, value.detach());
}

void Module::zero_grad() {
  for (auto& [name, t] : named_parameters()) Tensor(t).set_grad(Tensor());
}

}  // namespace uoe::nn
