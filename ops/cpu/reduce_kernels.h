// CPU reductions: sums over any set of dims, min/max with indices along one dim.
#pragma once
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace uoe::cpu {

// Sums x over the dims with reduce[d] == true; the result drops those dims. float, double, int64.
// Deterministic: each output's sum is split into fixed-size chunks added in a fixed order.
Tensor reduce_sum(const Tensor& x, const std::vector<bool>& reduce);
// Max (or min) along `dim` (dropped in the result) and the int64 index of its first
// occurrence; NaN wins, as in PyTorch.
std::pair<Tensor, Tensor> reduce_minmax(const Tensor& x, int64_t dim, bool is_max);

}  // namespace uoe::cpu
