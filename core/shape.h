// Shape helpers: element counts, contiguous strides, dim wrapping, broadcasting, printing.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace uoe {

using Shape = std::vector<int64_t>;

int64_t shape_numel(const Shape& s);
Shape contiguous_strides(const Shape& s);
std::string shape_str(const Shape& s);  // "[2, 3]"
// Wraps a possibly negative dim into [0, ndim) (a 0-dim tensor has none); the error names `op`.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
// The permutation that moves `dim` last and keeps the other dims in order: [0, .., dim-1, dim+1, .., ndim-1, dim]
// (reducing the last dim of x.permute(it) gives rows in the order of the result with `dim` erased).
Shape dim_moved_last(int64_t ndim, int64_t dim);
// A sum over the dims flagged in `reduce`: the result's shape (the kept dims), the kept (K) and reduced (R)
// element counts, and the permutations that put the reduced dims last (rows of R to sum, in the result's
// order) or first (R rows of K columns).
struct ReductionSplit {
  Shape out_shape, rows_perm, cols_perm;
  int64_t K = 1, R = 1;
};
ReductionSplit split_reduction(const Shape& shape, const std::vector<bool>& reduce);
// NumPy broadcasting of two shapes; the error names `op` and shows both shapes.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

}  // namespace uoe
