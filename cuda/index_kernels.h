// CUDA indexing kernels: index_select / index_add along a dim, gather / scatter_add, topk (mirror of
// ops/cpu/index_kernels.h), plus the device-side range check of index tensors.
#pragma once
#include <utility>

#include "core/tensor.h"

namespace uoe::cuda {

// out = x.index_select(dim, index): x any strides; index int64 [m] (validated by the caller).
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
// out = x.clone(); out.select(dim, index[i]) += src.select(dim, i), in order of i (deterministic: each output
// element is owned by one thread, which adds its sources in order of i, as the CPU does).
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// out[p] = x[p with p[dim] = index[p]] for every position p of index.
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
// out = x.clone(); out[p with p[dim] = index[p]] += src[p] for every position p of index (deterministic, in the
// order of the positions along dim, as the CPU).
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// Per row along dim: the k largest (smallest) values, sorted, ties by lower index (NaN counts as the largest).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest);

// The first position (in memory order) of a contiguous int64 index tensor whose value is outside [0, size), or
// -1 when all are inside. Synchronises with the device to return the answer.
int64_t first_out_of_range(const Tensor& index, int64_t size);

}  // namespace uoe::cuda
