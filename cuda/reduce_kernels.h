// CUDA reductions: sums over any set of dims, min/max with indices along one dim (mirror of
// ops/cpu/reduce_kernels.h).
#pragma once
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace uoe::cuda {

// Sums x over the dims with reduce[d] == true; the result drops those dims. float, double, int32, int64.
// Deterministic: every output is summed by a fixed reduction tree that depends only on the shape (no atomics).
Tensor reduce_sum(const Tensor& x, const std::vector<bool>& reduce);
// Max (or min) along `dim` (dropped in the result) and the int64 index of its first occurrence; NaN wins (the
// first NaN), as on the CPU.
std::pair<Tensor, Tensor> reduce_minmax(const Tensor& x, int64_t dim, bool is_max);

}  // namespace uoe::cuda
