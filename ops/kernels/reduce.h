// The reduce kernel family, one declaration list for both backends: sums over any set of dims, min/max with indices
// along one dim. Implemented in ops/cpu/reduce_kernels.cpp and cuda/reduce_kernels.cu (asynchronous on the device's
// current stream); a build without CUDA links stubs that raise (cuda/stub/). Callers pick the backend with
// UOE_KERNEL (ops/backend.h). Both are deterministic: every output's summation order depends on the shape alone
// (fixed chunks on the CPU, a fixed reduction tree without atomics on a GPU), never on the thread count or timing.
#pragma once
#include <utility>
#include <vector>

#include "core/tensor.h"

#define UOE_REDUCE_KERNELS                                                                                       \
  /* Sums x over the dims with reduce[d] == true; the result drops those dims. float, double, int32, int64,      \
     and on the CPU bfloat16 (accumulated in float32, rounded once). */                                          \
  Tensor reduce_sum(const Tensor& x, const std::vector<bool>& reduce);                                          \
  /* Max (or min) along `dim` (dropped in the result) and the int64 index of its first occurrence; NaN wins (the \
     first NaN), as in PyTorch. */                                                                               \
  std::pair<Tensor, Tensor> reduce_minmax(const Tensor& x, int64_t dim, bool is_max);

namespace uoe::cpu {
UOE_REDUCE_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_REDUCE_KERNELS
}  // namespace uoe::cuda

#undef UOE_REDUCE_KERNELS
