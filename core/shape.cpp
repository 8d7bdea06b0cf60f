// Shape helpers.
#include "core/shape.h"

#include <algorithm>

#include "core/error.h"

namespace uoe {

int64_t shape_numel(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc *= std::max<int64_t>(s[i], 1);
  }
  return st;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(s[i]);
  }
  return out + "]";
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  UOE_CHECK(ndim > 0, "[", op, "] dim ", dim, ": a 0-dim tensor has no dims (reshape it to [1] first)");
  UOE_CHECK(dim >= -ndim && dim < ndim, "[", op, "] dim ", dim, " is out of range for a tensor with ", ndim,
            " dims (expected ", -ndim, " to ", ndim - 1, ")");
  return dim < 0 ? dim + ndim : dim;
}

Shape dim_moved_last(int64_t ndim, int64_t dim) {
  Shape perm;
  for (int64_t d = 0; d < ndim; ++d)
    if (d != dim) perm.push_back(d);
  perm.push_back(dim);
  return perm;
}

ReductionSplit split_reduction(const Shape& shape, const std::vector<bool>& reduce) {
  ReductionSplit s;
  Shape kept, reduced;
  for (int64_t d = 0; d < int64_t(shape.size()); ++d) {
    if (reduce[size_t(d)]) {
      reduced.push_back(d);
      s.R *= shape[size_t(d)];
    } else {
      kept.push_back(d);
      s.out_shape.push_back(shape[size_t(d)]);
      s.K *= shape[size_t(d)];
    }
  }
  s.rows_perm = kept;
  s.rows_perm.insert(s.rows_perm.end(), reduced.begin(), reduced.end());
  s.cols_perm = reduced;
  s.cols_perm.insert(s.cols_perm.end(), kept.begin(), kept.end());
  return s;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    UOE_CHECK(da == db || da == 1 || db == 1, "[", op, "] shapes ", shape_str(a), " and ",
              shape_str(b), " cannot be broadcast: dim ", i, " is ", da, " vs ", db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace uoe
