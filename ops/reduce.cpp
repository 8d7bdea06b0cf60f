// Reductions (sum, mean, max, min, argmax, sum_to): forward and backward.
#include <algorithm>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/bf16_views.h"
#include "ops/kernels/reduce.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// Marks the dims to reduce; empty `dims` means all. Repeated dims are an error.
std::vector<bool> reduce_mask(const Tensor& x, const Shape& dims, const char* op) {
  std::vector<bool> mask(size_t(x.dim()), dims.empty());
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, x.dim(), op);
    UOE_CHECK(!mask[w], "[", op, "] dim ", w, " appears twice in ", shape_str(dims));
    mask[w] = true;
  }
  return mask;
}

Shape keepdim_shape(const Tensor& x, const std::vector<bool>& mask) {
  Shape s = x.shape();
  for (size_t d = 0; d < s.size(); ++d)
    if (mask[d]) s[d] = 1;
  return s;
}

// grad of sum: broadcast g back over the reduced dims.
struct SumBackward final : autograd::Node {
  Shape in_shape, keep_shape;
  SumBackward(Shape in, Shape keep) : in_shape(std::move(in)), keep_shape(std::move(keep)) {}
  std::string name() const override { return "sum"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {g.reshape(keep_shape).expand(in_shape)}; }
};

std::pair<Tensor, Tensor> extreme(const char* op, const Tensor& x, int64_t dim, bool keepdim, bool is_max) {
  check_same_device(op, {x});
  dim = wrap_dim(dim, x.dim(), op);
  const Tensor xv = x.dim() == 0 ? x.reshape({1}) : x;
  const Tensor xc = compute_view(xv);
  auto [values, indices] = UOE_KERNEL(xc, reduce_minmax(xc, dim, is_max));
  Shape keep = xv.shape();
  keep[dim] = 1;
  indices = indices.reshape(keep);
  // With grad, the values are gathered at the indices: gather's backward routes g to them.
  values = autograd::needs_grad({xv}) ? gather(xv, dim, indices) : restore_dtype(values, x.dtype()).reshape(keep);
  if (!keepdim) {
    values = values.squeeze(dim);
    indices = indices.squeeze(dim);
  }
  if (x.dim() == 0) return {values.reshape({}), indices.reshape({})};
  return {values, indices};
}

}  // namespace

Tensor sum(const Tensor& x, const Shape& dims, bool keepdim) {
  check_same_device("sum", {x});
  const std::vector<bool> mask = reduce_mask(x, dims, "sum");
  const DType dt = is_floating(x.dtype()) ? x.dtype() : DType::Int64;
  const Tensor xc = cpu_bf16_view(x.to(dt));
  Tensor y = restore_dtype(UOE_KERNEL(xc, reduce_sum(xc, mask)), dt);
  const Shape keep = keepdim_shape(x, mask);
  if (keepdim) y = y.detach().reshape(keep);
  autograd::record<SumBackward>(y, {x}, x.shape(), keep);
  return y;
}

Tensor sum(const Tensor& x) { return sum(x, {}, false); }

Tensor mean(const Tensor& x, const Shape& dims, bool keepdim) {
  check_floating("mean", "x", x);
  const std::vector<bool> mask = reduce_mask(x, dims, "mean");
  int64_t count = 1;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (mask[d]) count *= x.size(d);
  return sum(x, dims, keepdim) / double(count);
}

Tensor mean(const Tensor& x) { return mean(x, {}, false); }

Tensor max(const Tensor& x, int64_t dim, bool keepdim) { return extreme("max", x, dim, keepdim, true).first; }
Tensor min(const Tensor& x, int64_t dim, bool keepdim) { return extreme("min", x, dim, keepdim, false).first; }
Tensor max(const Tensor& x) { return max(x.reshape({-1}), 0); }
Tensor min(const Tensor& x) { return min(x.reshape({-1}), 0); }

Tensor argmax(const Tensor& x, int64_t dim, bool keepdim) {
  NoGradGuard no_grad;
  return extreme("argmax", x, dim, keepdim, true).second;
}

Tensor sum_to(const Tensor& x, const Shape& shape) {
  if (x.shape() == shape) return x;
  const int64_t lead = x.dim() - int64_t(shape.size());
  UOE_CHECK(lead >= 0, "[sum_to] cannot sum shape ", shape_str(x.shape()), " to the larger shape ", shape_str(shape));
  Shape dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    const int64_t want = shape[d - lead];
    UOE_CHECK(want == x.size(d) || want == 1, "[sum_to] cannot sum shape ", shape_str(x.shape()), " to ",
              shape_str(shape));
    if (want == 1 && x.size(d) != 1) dims.push_back(d);
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

}  // namespace uoe::ops
