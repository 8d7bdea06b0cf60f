// Indexing ops (embedding, index_select, index_add, gather, scatter_add, topk): validation, forward, backward.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/bf16_views.h"
#include "ops/kernels/index.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// int64 contiguous copy of `index` with every value checked against [0, size).
Tensor checked_index(const char* op, const Tensor& index, int64_t size, const char* what) {
  check_index(op, "index", index);
  Tensor idx = index.to(DType::Int64).contiguous();
  auto raise = [&](int64_t i, int64_t v) {
    fail("[", op, "] index ", v, " at position ", i, " is out of range for ", what, " of size ", size, " (index shape ",
         shape_str(index.shape()), ")");
  };
  // On a GPU, checked on the device: only the first bad position comes back.
  const int64_t i = UOE_KERNEL(idx, first_out_of_range(idx, size));
  if (i >= 0) raise(i, idx.reshape({-1}).narrow(0, i, 1).to(Device::cpu()).data_ptr<int64_t>()[0]);
  return idx;
}

struct IndexSelectBackward final : autograd::Node {
  Shape in_shape;
  int64_t dim;
  IndexSelectBackward(Shape s, int64_t d) : in_shape(std::move(s)), dim(d) {}
  std::string name() const override { return "index_select"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    return {index_add(zeros(in_shape, like(g)), dim, saved(0), g)};
  }
};

struct IndexAddBackward final : autograd::Node {
  int64_t dim;
  explicit IndexAddBackward(int64_t d) : dim(d) {}
  std::string name() const override { return "index_add"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    return {g, Tensor(), next[2] ? index_select(g, dim, saved(0)) : Tensor()};
  }
};

struct GatherBackward final : autograd::Node {
  Shape in_shape;
  int64_t dim;
  GatherBackward(Shape s, int64_t d) : in_shape(std::move(s)), dim(d) {}
  std::string name() const override { return "gather"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    return {scatter_add(zeros(in_shape, like(g)), dim, saved(0), g)};
  }
};

struct ScatterAddBackward final : autograd::Node {
  int64_t dim;
  explicit ScatterAddBackward(int64_t d) : dim(d) {}
  std::string name() const override { return "scatter_add"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    return {g, Tensor(), next[2] ? gather(g, dim, saved(0)) : Tensor()};
  }
};

// index must fit inside x in every dim but `dim` (PyTorch's gather/scatter rule).
void check_index_fits(const char* op, const Tensor& x, int64_t dim, const Tensor& index) {
  UOE_CHECK(index.dim() == x.dim(), "[", op, "] index ", shape_str(index.shape()), " must have as many dims as x ",
            shape_str(x.shape()));
  for (int64_t d = 0; d < x.dim(); ++d)
    UOE_CHECK(d == dim || index.size(d) <= x.size(d), "[", op, "] index ", shape_str(index.shape()),
              " is larger than x ", shape_str(x.shape()), " in dim ", d);
}

}  // namespace

Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  check_same_device("index_select", {x, index});
  dim = wrap_dim(dim, x.dim(), "index_select");
  UOE_CHECK(index.dim() <= 1, "[index_select] index must be 1-D, got ", shape_str(index.shape()));
  const Tensor idx = checked_index("index_select", index, x.dim() ? x.size(dim) : 1, "dim of x");
  Tensor y = UOE_KERNEL(x, index_select(x, dim, idx));
  if (auto node = autograd::record<IndexSelectBackward>(y, {x}, x.shape(), dim)) node->save({idx});
  return y;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_same_device("index_add", {x, index, src});
  dim = wrap_dim(dim, x.dim(), "index_add");
  check_same_dtype("index_add", x, src);
  UOE_CHECK(index.dim() <= 1, "[index_add] index must be 1-D, got ", shape_str(index.shape()));
  Shape want = x.shape();
  want[dim] = index.numel();
  UOE_CHECK(src.shape() == want, "[index_add] x is ", shape_str(x.shape()), ", index has ", index.numel(),
            " entries, so src must be ", shape_str(want), ", got ", shape_str(src.shape()));
  const Tensor idx = checked_index("index_add", index, x.size(dim), "dim of x");
  const Tensor xc = cpu_bf16_view(x), sc = cpu_bf16_view(src);
  Tensor y = restore_dtype(UOE_KERNEL(xc, index_add(xc, dim, idx, sc)), x.dtype());
  if (auto node = autograd::record<IndexAddBackward>(y, {x, index, src}, dim)) node->save({idx});
  return y;
}

Tensor embedding(const Tensor& weight, const Tensor& ids) {
  check_same_device("embedding", {weight, ids});
  UOE_CHECK(weight.dim() == 2, "[embedding] weight must be [vocab, dim], got ", shape_str(weight.shape()));
  Shape out_shape = ids.shape();
  out_shape.push_back(weight.size(1));
  check_index("embedding", "ids", ids);
  return index_select(weight, 0, ids.reshape({-1})).reshape(out_shape);
}

Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  check_same_device("gather", {x, index});
  dim = wrap_dim(dim, x.dim(), "gather");
  check_index_fits("gather", x, dim, index);
  const Tensor idx = checked_index("gather", index, x.size(dim), "dim of x");
  const Tensor iv = idx.view(index.shape());
  Tensor y = UOE_KERNEL(x, gather(x, dim, iv));
  if (auto node = autograd::record<GatherBackward>(y, {x}, x.shape(), dim)) node->save({idx.view(index.shape())});
  return y;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  check_same_device("scatter_add", {x, index, src});
  dim = wrap_dim(dim, x.dim(), "scatter_add");
  check_same_dtype("scatter_add", x, src);
  check_index_fits("scatter_add", x, dim, index);
  UOE_CHECK(src.dim() == index.dim(), "[scatter_add] src ", shape_str(src.shape()), " and index ",
            shape_str(index.shape()), " must have the same number of dims");
  for (int64_t d = 0; d < index.dim(); ++d)
    UOE_CHECK(index.size(d) <= src.size(d), "[scatter_add] index ", shape_str(index.shape()), " is larger than src ",
              shape_str(src.shape()), " in dim ", d);
  const Tensor idx = checked_index("scatter_add", index, x.size(dim), "dim of x").view(index.shape());
  Tensor s = src;
  for (int64_t d = 0; d < index.dim(); ++d) s = s.narrow(d, 0, index.size(d));
  const Tensor xc = cpu_bf16_view(x), sc = cpu_bf16_view(s);
  Tensor y = restore_dtype(UOE_KERNEL(xc, scatter_add(xc, dim, idx, sc)), x.dtype());
  if (auto node = autograd::record<ScatterAddBackward>(y, {x, index, s}, dim)) node->save({idx});
  return y;
}

}  // namespace uoe::ops
