// topk: the k largest (or smallest) entries along a dim, sorted; values are differentiable (through gather).
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/index.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  check_same_device("topk", {x});
  UOE_CHECK(x.dim() >= 1, "[topk] needs at least a 1-D tensor, got shape ", shape_str(x.shape()));
  dim = wrap_dim(dim, x.dim(), "topk");
  UOE_CHECK(k >= 0 && k <= x.size(dim), "[topk] k = ", k, " is out of range for dim ", dim, " of size ", x.size(dim),
            " (shape ", shape_str(x.shape()), ")");
  const Tensor xc = compute_view(x);
  auto [values, indices] = UOE_KERNEL(xc, topk(xc, k, dim, largest));
  // With grad, the values are gathered at the indices: gather's backward routes g to them.
  if (autograd::needs_grad({x})) return {gather(x, dim, indices), indices};
  return {restore_dtype(values, x.dtype()), indices};
}

}  // namespace uoe::ops
