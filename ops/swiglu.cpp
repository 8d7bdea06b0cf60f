// SwiGLU's gating h = silu(g) ⊙ p as one op: the forward in one pass over g and p, both derivatives in one pass
// over g, p and dh (ops/kernels/elementwise.h), so neither silu(g) nor the composed backward's products are
// written to memory. Equal to silu(g) * p and its backward, product for product.
#include "autograd/node.h"
#include "ops/backend.h"
#include "ops/bf16_views.h"
#include "ops/kernels/elementwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

void check_gate_operands(const char* op, const char* name, const Tensor& g, const Tensor& other) {
  check_same_device(op, {g, other});
  check_floating(op, "g", g);
  check_same_dtype(op, g, other);
  UOE_CHECK(g.shape() == other.shape(), "[", op, "] g and ", name, " must have one shape, got ", describe(g), " and ",
            describe(other));
}

// dh -> (dg, dp), from the saved g and p.
struct SwiGluBackward final : autograd::Node {
  std::string name() const override { return "swiglu"; }
  std::vector<Tensor> apply(const Tensor& dh) override {
    auto [dg, dp] = swiglu_backward(saved(0), saved(1), dh);
    return {dg, dp};
  }
};

}  // namespace

Tensor swiglu(const Tensor& g, const Tensor& p) {
  check_gate_operands("swiglu", "p", g, p);
  const OnDevice on_device(g);
  const Tensor gc = elementwise_view(g), pc = elementwise_view(p);
  Tensor h = restore_dtype(UOE_KERNEL(gc, swiglu(gc, pc)), g.dtype());  // [..., n]
  if (auto node = autograd::record<SwiGluBackward>(h, {g, p})) node->save({g, p});
  return h;
}

std::pair<Tensor, Tensor> swiglu_backward(const Tensor& g, const Tensor& p, const Tensor& dh) {
  check_gate_operands("swiglu_backward", "p", g, p);
  check_gate_operands("swiglu_backward", "dh", g, dh);
  const OnDevice on_device(g);
  const Tensor gc = elementwise_view(g).contiguous(), pc = elementwise_view(p).contiguous(),
               dc = elementwise_view(dh).contiguous();
  const TensorOptions opt = TensorOptions{}.with_dtype(gc.dtype()).with_device(gc.device());
  Tensor dg = empty(gc.shape(), opt), dp = empty(gc.shape(), opt);
  UOE_KERNEL(gc, swiglu_backward(gc, pc, dc, dg, dp));
  return {restore_dtype(dg, g.dtype()), restore_dtype(dp, g.dtype())};
}

}  // namespace uoe::ops
