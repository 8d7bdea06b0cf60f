// Copies and conversions: contiguous, clone, to(dtype), to(device), copy_, with their backward.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/copy.h"
#include "ops/op_utils.h"

namespace uoe {
namespace {

struct CloneBackward final : autograd::Node {
  std::string name() const override { return "clone"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {g}; }
};

struct CastBackward final : autograd::Node {
  DType in_dtype;
  explicit CastBackward(DType d) : in_dtype(d) {}
  std::string name() const override { return "to_dtype"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {g.to(in_dtype)}; }
};

struct ToDeviceBackward final : autograd::Node {
  Device in_device;
  explicit ToDeviceBackward(Device d) : in_device(d) {}
  std::string name() const override { return "to_device"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {g.to(in_device)}; }
};

// A contiguous copy of `src` in `dtype` on src's device, with no autograd history.
Tensor copy_as(const Tensor& src, DType dtype) {
  ops::check_same_device("copy", {src});
  Tensor out = empty(src.shape(), TensorOptions{}.with_dtype(dtype).with_device(src.device()));
  UOE_KERNEL(out, copy_cast(out, src));
  return out;
}

}  // namespace

Tensor Tensor::clone() const {
  Tensor out = copy_as(*this, dtype());
  autograd::record<CloneBackward>(out, {*this});
  return out;
}

Tensor Tensor::contiguous() const { return is_contiguous() ? *this : clone(); }

Tensor Tensor::to(DType d) const {
  if (d == dtype()) return *this;
  UOE_CHECK(!requires_grad() || is_floating(d), "[to] cannot cast a tensor that requires grad to ", dtype_name(d),
            ": gradients need a floating-point dtype");
  Tensor out = copy_as(*this, d);
  autograd::record<CastBackward>(out, {*this}, dtype());
  return out;
}

Tensor Tensor::to(Device d) const {
  if (d == device()) return *this;
  const Tensor src = contiguous();
  Tensor out = empty(shape(), TensorOptions{}.with_dtype(dtype()).with_device(d));
  cuda::copy_bytes(out.raw_data(), d, src.raw_data(), device(), size_t(numel()) * itemsize());
  autograd::record<ToDeviceBackward>(out, {*this}, device());
  return out;
}

Tensor& Tensor::copy_(const Tensor& src) {
  UOE_CHECK(!autograd::needs_grad({*this, src}), "[copy_] in-place copy into or from a tensor that requires grad ",
            "while grad mode is on; wrap it in NoGradGuard");
  UOE_CHECK(broadcast_shapes(src.shape(), shape(), "copy_") == shape(), "[copy_] source of shape ",
            shape_str(src.shape()), " cannot be broadcast to the destination's shape ", shape_str(shape()));
  const Tensor s = src.device() == device() ? ops::inplace_source("copy_", *this, src) : src.to(device());
  ops::check_same_device("copy_", {*this, s});
  UOE_KERNEL(*this, copy_cast(*this, s));
  bump_version();
  return *this;
}

}  // namespace uoe
