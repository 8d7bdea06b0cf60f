// Joining and splitting: cat, stack, split (views), with backward.
#include <numeric>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// grad of cat: each input receives its slice of g.
struct CatBackward final : autograd::Node {
  int64_t dim;
  std::vector<int64_t> sizes;
  CatBackward(int64_t d, std::vector<int64_t> s) : dim(d), sizes(std::move(s)) {}
  std::string name() const override { return "cat"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    std::vector<Tensor> out;
    int64_t start = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      out.push_back(next[i] ? g.narrow(dim, start, sizes[i]) : Tensor());
      start += sizes[i];
    }
    return out;
  }
};

}  // namespace

Tensor cat(const std::vector<Tensor>& xs, int64_t dim) {
  UOE_CHECK(!xs.empty(), "[cat] needs at least one tensor");
  const Tensor& first = xs[0];
  dim = wrap_dim(dim, first.dim(), "cat");
  std::vector<int64_t> sizes;
  Shape out_shape = first.shape();
  out_shape[dim] = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const Tensor& x = xs[i];
    check_same_device("cat", {first, x});
    UOE_CHECK(x.dtype() == first.dtype(), "[cat] tensor ", i, " is ", describe(x), " but tensor 0 is ", describe(first));
    UOE_CHECK(x.dim() == first.dim(), "[cat] tensor ", i, " has shape ", shape_str(x.shape()), " but tensor 0 has ",
              shape_str(first.shape()));
    for (int64_t d = 0; d < x.dim(); ++d)
      UOE_CHECK(d == dim || x.size(d) == first.size(d), "[cat] tensor ", i, " has shape ", shape_str(x.shape()),
                " but tensor 0 has ", shape_str(first.shape()), ": they must match except in dim ", dim);
    sizes.push_back(x.size(dim));
    out_shape[dim] += x.size(dim);
  }
  Tensor out = empty(out_shape, like(first));
  {
    NoGradGuard no_grad;
    int64_t start = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      out.narrow(dim, start, sizes[i]).copy_(xs[i]);
      start += sizes[i];
    }
  }
  if (autograd::needs_grad(xs)) {
    auto node = std::make_shared<CatBackward>(dim, sizes);
    autograd::attach(node, out, xs);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& xs, int64_t dim) {
  UOE_CHECK(!xs.empty(), "[stack] needs at least one tensor");
  dim = wrap_dim(dim, xs[0].dim() + 1, "stack");
  std::vector<Tensor> us;
  for (size_t i = 0; i < xs.size(); ++i) {
    UOE_CHECK(xs[i].shape() == xs[0].shape(), "[stack] tensor ", i, " has shape ", shape_str(xs[i].shape()),
              " but tensor 0 has ", shape_str(xs[0].shape()));
    us.push_back(xs[i].unsqueeze(dim));
  }
  return cat(us, dim);
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t total = std::accumulate(sizes.begin(), sizes.end(), int64_t(0));
  UOE_CHECK(total == x.size(dim), "[split] sizes sum to ", total, " but dim ", dim, " of ", shape_str(x.shape()),
            " has size ", x.size(dim));
  std::vector<Tensor> out;
  int64_t start = 0;
  for (int64_t s : sizes) {
    UOE_CHECK(s >= 0, "[split] negative size ", s);
    out.push_back(x.narrow(dim, start, s));
    start += s;
  }
  return out;
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  UOE_CHECK(split_size > 0, "[split] split_size must be positive, got ", split_size);
  dim = wrap_dim(dim, x.dim(), "split");
  std::vector<int64_t> sizes;
  for (int64_t left = x.size(dim); left > 0; left -= split_size) sizes.push_back(std::min(split_size, left));
  return split(x, sizes, dim);
}

}  // namespace uoe::ops
