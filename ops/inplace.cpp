// In-place ops for training loops (zero_, fill_, add_, mul_): bump the version, never record a graph.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/bf16_views.h"
#include "ops/kernels/copy.h"
#include "ops/kernels/elementwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe {
namespace {

// In-place writes are not differentiable: refuse them while they would corrupt a graph.
void check_inplace(const char* op, const Tensor& self, const Tensor& other = Tensor()) {
  UOE_CHECK(!autograd::grad_enabled() || !(self.requires_grad() || (other.defined() && other.requires_grad())),
            "[", op, "] in-place update of a tensor that requires grad (or with one) while grad mode is on; ",
            "use the out-of-place op, or wrap the update in NoGradGuard");
  UOE_CHECK(broadcast_shapes(other.defined() ? other.shape() : self.shape(), self.shape(), op) == self.shape(), "[",
            op, "] operand of shape ", shape_str(other.shape()), " cannot be broadcast to ", shape_str(self.shape()));
}

}  // namespace

Tensor& Tensor::fill_(double value) {
  check_inplace("fill_", *this);  // (an expanded target is fine: every element gets the same value)
  UOE_KERNEL(*this, fill(*this, value));
  bump_version();
  return *this;
}

Tensor& Tensor::zero_() { return fill_(0.0); }

// self = self (op) other, written in place (bfloat16 directly, on either backend; float16 goes through float32 and
// copies back).
static Tensor& update_inplace(const char* op, Tensor& self, kernels::BinaryKind kind, const Tensor& other_in) {
  check_inplace(op, self, other_in);
  const Tensor other = ops::inplace_source(op, self, other_in);
  ops::check_same_device(op, {self, other});
  ops::check_same_dtype(op, self, other);
  if (!ops::elementwise_native(self)) {
    const Tensor a = ops::compute_view(self), b = ops::compute_view(other);
    return self.copy_(ops::restore_dtype(UOE_KERNEL(a, binary(kind, a, b)), self.dtype()));
  }
  UOE_KERNEL(self, binary_into(kind, self, self, other));
  self.bump_version();
  return self;
}

Tensor& Tensor::add_(const Tensor& other, double alpha) {
  return update_inplace("add_", *this, kernels::BinaryKind::Add, alpha == 1.0 ? other : other * alpha);
}

Tensor& Tensor::mul_(const Tensor& other) { return update_inplace("mul_", *this, kernels::BinaryKind::Mul, other); }

Tensor& Tensor::mul_(double value) { return mul_(ops::scalar_like(value, *this)); }

}  // namespace uoe
