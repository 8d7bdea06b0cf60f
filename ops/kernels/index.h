// The indexing kernel family, one declaration list for both backends: index_select / index_add along a dim,
// gather / scatter_add, topk, and the range check of index tensors. Implemented in ops/cpu/index_kernels.cpp and
// cuda/index_kernels.cu (on the device's current stream); a build without CUDA links stubs that raise
// (cuda/stub/). Callers pick the backend with UOE_KERNEL (ops/backend.h). Tensors in, tensors out: each kernel
// allocates its result on its input's device. Every sum runs in index order on both backends (each output element
// is owned by one thread), so results never depend on the thread count or the grid. The CPU's index_add and
// scatter_add also take bfloat16 (summed in float32, rounded once).
#pragma once
#include <utility>

#include "core/tensor.h"

#define UOE_INDEX_KERNELS                                                                                        \
  /* out = x.index_select(dim, index): x any strides; index int64 [m] (validated by the caller). */               \
  Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);                                         \
  /* out = x.clone(); out.select(dim, index[i]) += src.select(dim, i), in order of i. */                          \
  Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);                         \
  /* out[p] = x[p with p[dim] = index[p]] for every position p of index. */                                       \
  Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);                                               \
  /* out = x.clone(); out[p with p[dim] = index[p]] += src[p] for every position p of index, in the order of the  \
     positions along dim. */                                                                                      \
  Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);                       \
  /* Per row along dim: the k largest (smallest) values, sorted, ties by lower index (NaN counts as the largest). \
   */                                                                                                             \
  std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim, bool largest);                          \
  /* The first position (in memory order) of a contiguous int64 index tensor whose value is outside [0, size), or \
     -1 when all are inside. The GPU's synchronises with the device to return the answer. */                      \
  int64_t first_out_of_range(const Tensor& index, int64_t size);

namespace uoe::cpu {
UOE_INDEX_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_INDEX_KERNELS
}  // namespace uoe::cuda

#undef UOE_INDEX_KERNELS
