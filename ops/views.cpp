// Views without copies (view, reshape, permute, transpose, narrow, slice, select, expand,
// squeeze, unsqueeze, flatten) and their backward.
#include <algorithm>
#include <numeric>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe {
namespace {

// grad of any reshaping view: reshape back.
struct ReshapeBackward final : autograd::Node {
  Shape in_shape;
  explicit ReshapeBackward(Shape s) : in_shape(std::move(s)) {}
  std::string name() const override { return "reshape"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {g.reshape(in_shape)}; }
};

struct PermuteBackward final : autograd::Node {
  Shape inverse;
  explicit PermuteBackward(Shape inv) : inverse(std::move(inv)) {}
  std::string name() const override { return "permute"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {g.permute(inverse)}; }
};

struct ExpandBackward final : autograd::Node {
  Shape in_shape;
  explicit ExpandBackward(Shape s) : in_shape(std::move(s)) {}
  std::string name() const override { return "expand"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {ops::sum_to(g, in_shape)}; }
};

// grad of slice: zeros of the input's shape with g written into the sliced region.
struct SliceBackward final : autograd::Node {
  Shape in_shape;
  int64_t dim, start, end, step;
  SliceBackward(Shape s, int64_t d, int64_t b, int64_t e, int64_t st)
      : in_shape(std::move(s)), dim(d), start(b), end(e), step(st) {}
  std::string name() const override { return "slice"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    Tensor out = zeros(in_shape, ops::like(g));
    out.slice(dim, start, end, step).copy_(g);
    return {out};
  }
  // Only the sliced region of the input's gradient sum changes (UoE's routing slices of the expert weights: a full
  // zero tensor and a full add per weight before).
  bool add_into(Tensor& sum, const Tensor& g) override {
    if (sum.dtype() != g.dtype()) return false;
    sum.slice(dim, start, end, step).add_(g);
    return true;
  }
};

Tensor view_of(const Tensor& t, Shape shape, Shape strides, int64_t offset) {
  return alias_with(t, std::move(shape), std::move(strides), offset);
}

// Infers one -1 entry and checks the element count.
Shape infer_shape(const Shape& shape, int64_t numel, const char* op, const Shape& from) {
  Shape out = shape;
  int64_t known = 1, infer = -1;
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == -1) {
      UOE_CHECK(infer < 0, "[", op, "] only one dim can be -1, got ", shape_str(shape));
      infer = int64_t(i);
    } else {
      UOE_CHECK(out[i] >= 0, "[", op, "] invalid size ", out[i], " in ", shape_str(shape));
      known *= out[i];
    }
  }
  if (infer >= 0) {
    UOE_CHECK(known != 0 && numel % known == 0, "[", op, "] cannot view ", shape_str(from), " (", numel,
              " elements) as ", shape_str(shape));
    out[infer] = numel / known;
  }
  UOE_CHECK(shape_numel(out) == numel, "[", op, "] cannot view ", shape_str(from), " (", numel,
            " elements) as ", shape_str(shape), " (", shape_numel(out), " elements)");
  return out;
}

// Strides for viewing `t` as `shape` without a copy, if its strides allow it.
std::optional<Shape> view_strides(const Tensor& t, const Shape& shape) {
  if (t.numel() == 0 || t.is_contiguous()) return contiguous_strides(shape);
  // Walk groups of old dims that are contiguous among themselves and match them to new dims.
  const Shape& os = t.shape();
  const Shape& ost = t.strides();
  Shape st(shape.size());
  int64_t nd = int64_t(shape.size()) - 1;
  int64_t chunk_base = ost.empty() ? 1 : ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t od = int64_t(os.size()) - 1; od >= 0; --od) {
    tensor_numel *= os[od];
    if (od == 0 || (os[od - 1] != 1 && ost[od - 1] != tensor_numel * chunk_base)) {
      while (nd >= 0 && (view_numel < tensor_numel || shape[nd] == 1)) {
        st[nd] = view_numel * chunk_base;
        view_numel *= shape[nd];
        --nd;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (od > 0) {
        chunk_base = ost[od - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (nd != -1) return std::nullopt;
  return st;
}

}  // namespace

Tensor Tensor::view(const Shape& shape_in) const {
  const Shape shape = infer_shape(shape_in, numel(), "view", this->shape());
  auto st = view_strides(*this, shape);
  UOE_CHECK(st, "[view] cannot view a tensor of shape ", shape_str(this->shape()), " and strides ",
            shape_str(strides()), " as ", shape_str(shape), " without a copy; use reshape()");
  Tensor out = view_of(*this, shape, *st, offset());
  autograd::record<ReshapeBackward>(out, {*this}, this->shape());
  return out;
}

Tensor Tensor::reshape(const Shape& shape_in) const {
  const Shape shape = infer_shape(shape_in, numel(), "reshape", this->shape());
  if (view_strides(*this, shape)) return view(shape);
  return clone().view(shape);
}

Tensor Tensor::permute(const Shape& dims) const {
  const int64_t n = dim();
  UOE_CHECK(int64_t(dims.size()) == n, "[permute] got ", dims.size(), " dims ", shape_str(dims),
            " for a tensor of shape ", shape_str(shape()));
  Shape shp(n), st(n), inverse(n);
  std::vector<bool> used(n, false);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = wrap_dim(dims[i], n, "permute");
    UOE_CHECK(!used[d], "[permute] dim ", d, " repeated in ", shape_str(dims));
    used[d] = true;
    shp[i] = shape()[d];
    st[i] = strides()[d];
    inverse[d] = i;
  }
  Tensor out = view_of(*this, shp, st, offset());
  autograd::record<PermuteBackward>(out, {*this}, inverse);
  return out;
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  Shape dims(dim());
  std::iota(dims.begin(), dims.end(), 0);
  std::swap(dims[wrap_dim(d0, dim(), "transpose")], dims[wrap_dim(d1, dim(), "transpose")]);
  return permute(dims);
}

Tensor Tensor::slice(int64_t d, int64_t start, int64_t end, int64_t step) const {
  d = wrap_dim(d, dim(), "slice");
  const int64_t n = shape()[d];
  UOE_CHECK(step > 0, "[slice] step must be positive, got ", step);
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape shp = shape(), st = strides();
  shp[d] = (end - start + step - 1) / step;
  st[d] *= step;
  Tensor out = view_of(*this, shp, st, offset() + start * strides()[d]);
  autograd::record<SliceBackward>(out, {*this}, shape(), d, start, end, step);
  return out;
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  d = wrap_dim(d, dim(), "narrow");
  UOE_CHECK(start >= 0 && length >= 0 && start + length <= shape()[d], "[narrow] range [", start, ", ",
            start + length, ") is out of bounds for dim ", d, " of size ", shape()[d], " (shape ",
            shape_str(shape()), ")");
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  d = wrap_dim(d, dim(), "select");
  const int64_t n = shape()[d];
  UOE_CHECK(index >= -n && index < n, "[select] index ", index, " is out of range for dim ", d, " of size ", n);
  if (index < 0) index += n;
  return narrow(d, index, 1).squeeze(d);
}

Tensor Tensor::expand(const Shape& shape_in) const {
  const int64_t n = int64_t(shape_in.size());
  UOE_CHECK(n >= dim(), "[expand] cannot expand shape ", shape_str(shape()), " to fewer dims ", shape_str(shape_in));
  Shape shp(n), st(n);
  for (int64_t i = n - 1, j = dim() - 1; i >= 0; --i, --j) {
    const int64_t have = j >= 0 ? shape()[j] : 1;
    UOE_CHECK(shape_in[i] >= 0 || (shape_in[i] == -1 && j >= 0), "[expand] cannot expand shape ", shape_str(shape()),
              " to ", shape_str(shape_in), ": dim ", i, " must be a size >= 0",
              j >= 0 ? std::string(" or -1 (keep)") : std::string(" (a new dim cannot be -1)"));
    const int64_t want = shape_in[i] == -1 ? have : shape_in[i];
    UOE_CHECK(have == want || have == 1, "[expand] cannot expand shape ", shape_str(shape()), " to ",
              shape_str(shape_in), ": dim ", i, " is ", have, ", expected 1 or ", want);
    shp[i] = want;
    st[i] = (j >= 0 && have == want) ? strides()[j] : 0;
  }
  if (shp == shape()) return *this;
  Tensor out = view_of(*this, shp, st, offset());
  autograd::record<ExpandBackward>(out, {*this}, shape());
  return out;
}

Tensor Tensor::squeeze(int64_t d) const {
  d = wrap_dim(d, dim(), "squeeze");
  if (shape()[d] != 1) return *this;
  Shape shp = shape(), st = strides();
  shp.erase(shp.begin() + d);
  st.erase(st.begin() + d);
  Tensor out = view_of(*this, shp, st, offset());
  autograd::record<ReshapeBackward>(out, {*this}, shape());
  return out;
}

Tensor Tensor::unsqueeze(int64_t d) const {
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape shp = shape(), st = strides();
  const int64_t s = d < dim() ? strides()[d] * shape()[d] : 1;
  shp.insert(shp.begin() + d, 1);
  st.insert(st.begin() + d, s);
  Tensor out = view_of(*this, shp, st, offset());
  autograd::record<ReshapeBackward>(out, {*this}, shape());
  return out;
}

Tensor Tensor::flatten(int64_t start_dim, int64_t end_dim) const {
  if (dim() == 0) return reshape({1});
  start_dim = wrap_dim(start_dim, dim(), "flatten");
  end_dim = wrap_dim(end_dim, dim(), "flatten");
  UOE_CHECK(start_dim <= end_dim, "[flatten] start_dim ", start_dim, " is after end_dim ", end_dim);
  Shape shp(shape().begin(), shape().begin() + start_dim);
  int64_t m = 1;
  for (int64_t i = start_dim; i <= end_dim; ++i) m *= shape()[i];
  shp.push_back(m);
  shp.insert(shp.end(), shape().begin() + end_dim + 1, shape().end());
  return reshape(shp);
}

}  // namespace uoe
