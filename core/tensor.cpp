// Tensor metadata and autograd state (the backward entry and hooks are the op layer's: ops/tensor_autograd.cpp).
#include "core/tensor.h"

#include "core/error.h"

namespace uoe {

TensorImpl& Tensor::impl() const {
  UOE_CHECK(impl_, "[tensor] use of an undefined tensor");
  return *impl_;
}

int64_t Tensor::size(int64_t d) const { return shape()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }

bool Tensor::is_contiguous() const {
  if (numel() == 0) return true;
  int64_t expected = 1;
  for (int64_t i = dim() - 1; i >= 0; --i) {
    if (shape()[i] == 1) continue;
    if (strides()[i] != expected) return false;
    expected *= shape()[i];
  }
  return true;
}

void* Tensor::raw_data() const {
  return static_cast<char*>(storage()->data()) + offset() * int64_t(itemsize());
}

void Tensor::check_dtype(DType expected, const char* op) const {
  UOE_CHECK(dtype() == expected, "[", op, "] expected dtype ", dtype_name(expected), ", got ",
            dtype_name(dtype()), " (shape ", shape_str(shape()), ")");
}

Tensor& Tensor::requires_grad_(bool r) {
  UOE_CHECK(is_leaf(), "[requires_grad_] only leaf tensors can change requires_grad; use detach() first");
  UOE_CHECK(!r || is_floating(dtype()), "[requires_grad_] only floating-point tensors can require grad, got ",
            dtype_name(dtype()));
  impl().autograd.requires_grad = r;
  return *this;
}

Tensor Tensor::grad() const {
  const auto& g = impl().autograd.grad;
  return g ? *g : Tensor();
}

void Tensor::set_grad(const Tensor& g) {
  if (!g.defined()) {
    impl().autograd.grad.reset();
    return;
  }
  UOE_CHECK(g.shape() == shape() && g.dtype() == dtype() && g.device() == device(), "[set_grad] a gradient ",
            dtype_name(g.dtype()), shape_str(g.shape()), " on ", g.device().str(), " for a tensor ", dtype_name(dtype()),
            shape_str(shape()), " on ", device().str(), ": expected the same shape, dtype and device");
  impl().autograd.grad = std::make_shared<Tensor>(g);
}

Tensor Tensor::detach() const {
  return make_tensor(storage(), shape(), strides(), offset(), dtype());
}

Tensor make_tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype) {
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::move(storage);
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->offset = offset;
  impl->dtype = dtype;
  return Tensor(std::move(impl));
}

Tensor alias_with(const Tensor& base, Shape shape, Shape strides, int64_t offset) {
  return make_tensor(base.storage(), std::move(shape), std::move(strides), offset, base.dtype());
}

}  // namespace uoe
