// Comparisons (eq, ne, lt, le, gt, ge -> bool) and where(cond, a, b) with its backward.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/bf16_views.h"
#include "ops/kernels/elementwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

using kernels::BinaryKind;

Tensor compare(const char* op, BinaryKind kind, const Tensor& a, const Tensor& b) {
  check_binary(op, a, b);
  const Tensor ac = elementwise_view(a), bc = elementwise_view(b);
  return UOE_KERNEL(ac, binary(kind, ac, bc));
}

struct WhereBackward final : autograd::Node {
  Shape a_shape, b_shape;
  WhereBackward(Shape sa, Shape sb) : a_shape(std::move(sa)), b_shape(std::move(sb)) {}
  std::string name() const override { return "where"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const Tensor cond = saved(0);
    const Tensor zero = scalar_like(0, g);
    return {Tensor(), next[1] ? sum_to(where(cond, g, zero), a_shape) : Tensor(),
            next[2] ? sum_to(where(cond, zero, g), b_shape) : Tensor()};
  }
};

}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", BinaryKind::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", BinaryKind::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", BinaryKind::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", BinaryKind::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", BinaryKind::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", BinaryKind::Ge, a, b); }

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", {cond, a, b});
  UOE_CHECK(cond.dtype() == DType::Bool, "[where] cond must be bool, got ", describe(cond));
  UOE_CHECK(a.dtype() == b.dtype(), "[where] dtypes differ: a is ", describe(a), " and b is ", describe(b));
  broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor y = UOE_KERNEL(a, where(cond, a, b));
  if (auto node = autograd::record<WhereBackward>(y, {cond, a, b}, a.shape(), b.shape())) node->save({cond});
  return y;
}

}  // namespace uoe::ops
