// CPU indexing kernels: index_select / index_add along a dim, gather / scatter_add, topk.
#pragma once
#include <utility>

#include "core/tensor.h"

namespace uoe::cpu {

// out = x.index_select(dim, index): x any strides; index int64 [m] (validated by the caller).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out = x.clone(); out.select(dim, index[i]) += src.select(dim, i), in order of i.
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// out[p] = x[p with p[dim] = index[p]] for every position p of index.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out = x.clone(); out[p with p[dim] = index[p]] += src[p] for every position p of index.
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// Per row along dim: the k largest (smallest) values, sorted, ties by lower index.
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest);

}  // namespace uoe::cpu
