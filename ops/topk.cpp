// topk: the k largest (or smallest) entries along a dim, sorted; values are differentiable.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/cpu/index_kernels.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// grad of the selected values flows back to the positions they came from.
struct TopkBackward final : autograd::Node {
  Shape in_shape;
  int64_t dim;
  TopkBackward(Shape s, int64_t d) : in_shape(std::move(s)), dim(d) {}
  std::string name() const override { return "topk"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    return {scatter_add(zeros(in_shape, like(g)), dim, saved(0), g)};
  }
};

}  // namespace

std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest) {
  check_cpu_op("topk", {x});
  UOE_CHECK(x.dim() >= 1, "[topk] needs at least a 1-D tensor, got shape ", shape_str(x.shape()));
  dim = wrap_dim(dim, x.dim(), "topk");
  UOE_CHECK(k >= 0 && k <= x.size(dim), "[topk] k = ", k, " is out of range for dim ", dim, " of size ", x.size(dim),
            " (shape ", shape_str(x.shape()), ")");
  auto [values, indices] = cpu::topk(compute_view(x), k, dim, largest);
  values = restore_dtype(values, x.dtype());
  if (auto node = autograd::record<TopkBackward>(values, {x}, x.shape(), dim)) node->save({indices});
  return {values, indices};
}

}  // namespace uoe::ops
