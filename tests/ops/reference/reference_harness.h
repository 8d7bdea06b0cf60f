// The shared machinery of the ReferenceOps tests: multi-indices, reference tensors, inputs, cases, comparison.
//
// The tests check forward values of the N-dimensional ops against naive reference loops in double precision, on
// explicit multi-indices: every dim (and its negative alias), keepdim on and off, random 3-D and 4-D inputs of
// unequal sizes (one with a size-1 dim), in float64 and float32, contiguous or not (permuted, sliced with an offset
// and steps, or both). Gradient checks and CPU-vs-CUDA parity cannot see a forward that puts its results in the
// wrong order.
#pragma once
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace uoe::reference {

using Index = std::vector<int64_t>;

template <typename... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// ---- multi-indices and reference tensors ----

int64_t ravel(const Index& i, const Shape& s);

// f(index) for every multi-index of `shape`, in row-major order.
template <typename F>
void for_each_index(const Shape& shape, F&& f) {
  Index i(shape.size(), 0);
  for (int64_t k = 0, n = shape_numel(shape); k < n; ++k) {
    f(static_cast<const Index&>(i));
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0 && ++i[d] == shape[d]; --d) i[d] = 0;
  }
}

Shape erased(Shape s, int64_t d);
Shape inserted(Shape s, int64_t d, int64_t v);
Shape with(Shape s, int64_t d, int64_t v);
Shape ones_at(Shape s, int64_t mask);  // size 1 where bit d of mask is set

// Reference values: a shape and its elements in row-major order, in double.
struct Ref {
  Shape shape;
  std::vector<double> v;
  Ref() = default;
  explicit Ref(Shape s, double fill = 0.0) : shape(std::move(s)), v(size_t(shape_numel(shape)), fill) {}
  double& operator[](const Index& i) { return v[ravel(i, shape)]; }
  double operator[](const Index& i) const { return v[ravel(i, shape)]; }
  // x at index o of a broadcast result (o has at least as many dims; size-1 dims of x read index 0).
  double bcast(const Index& o) const;
};

// The same elements under another shape of equal size: row-major order is what reshape and (un)squeeze keep.
Ref reshaped(Ref r, Shape s);

// The values of x along dim d through index i (i[d] ignored).
std::vector<double> line(const Ref& x, Index i, int64_t d);

// ---- inputs: random views with known values ----

enum class Layout { Contiguous, Permuted, Sliced, PermutedSliced };
inline constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Permuted, Layout::Sliced, Layout::PermutedSliced};
const char* layout_name(Layout l);
Layout next_layout(Layout l, int k = 1);

// An op input: a view `t` of a fresh base tensor, and its values computed from the base by explicit index
// arithmetic (never through the library's strides); element k (row-major) of the view is element at[k] of the base.
struct Input {
  Tensor t, base;
  Ref ref;
  std::vector<int64_t> at;
};

// Logical shape s in `layout`. Permuted: dim i of the view is dim (i + 1) % n of a contiguous base. Sliced: along
// every base dim the view starts at 1 of a larger base, with step 2 along the first and last base dims.
Input make_input(const Shape& s, Layout layout, const std::function<Tensor(const Shape&)>& make_base);

inline const std::vector<Shape> kShapes = {{4, 3, 5}, {3, 2, 4, 5}, {2, 5, 1, 3}};

// One input configuration: shape, layout and dtype of the inputs, and a seed of its own.
struct Case {
  Shape shape;
  Layout layout;
  DType dtype;
  uint64_t seed;
  int64_t n() const { return int64_t(shape.size()); }
  std::string name() const { return str(shape_str(shape), " ", layout_name(layout), " ", dtype_name(dtype)); }
  double tol() const { return dtype == DType::Float64 ? 1e-12 : 1e-4; }
  // A random floating input of shape s in this case's layout and dtype; `salt` tells the inputs of one case apart.
  Input input(const Shape& s, uint64_t salt = 0, bool positive = false, bool grad = false) const;
  Input zeros_input(const Shape& s) const;
  Input bool_input(const Shape& s, uint64_t salt) const;
  // Random int64 indices in [0, high).
  Input index(const Shape& s, int64_t high, uint64_t salt = 0) const;
  Case in(Layout l) const { return {shape, l, dtype, seed}; }
};

std::vector<Case> all_cases(const std::vector<Shape>& shapes = kShapes);

// Every dim of an n-D tensor, then each again by its negative alias.
std::vector<int64_t> all_dims(int64_t n);
inline int64_t wrap(int64_t d, int64_t n) { return d < 0 ? d + n : d; }

// ---- comparison ----

// got has want's shape and values within tol * (1 + |want|); `what` names the op, dims and input on failure.
void expect_matches(const Tensor& got, const Ref& want, double tol, const std::string& what);

// Counts the tensors each test compares (expect_matches), records the count as its property "comparisons", and
// fails a test that compared none.
class ReferenceOps : public ::testing::Test {
 protected:
  void SetUp() override;
  void TearDown() override;
};

// ---- reference loops used by more than one family ----

// sum (or mean) over the dims set in mask.
Ref reduce_ref(const Ref& x, const std::vector<bool>& mask, bool keepdim, bool mean);

// The broadcast shape of a and b.
Shape broadcast(const Shape& a, const Shape& b);

// f of a and b elementwise, broadcast.
Ref binary_ref(const Ref& a, const Ref& b, const std::function<double(double, double)>& f);

}  // namespace uoe::reference
