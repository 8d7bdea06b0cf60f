// Forward values of the N-dimensional ops against naive reference loops in double precision, on explicit
// multi-indices: every dim (and its negative alias), keepdim on and off, random 3-D and 4-D inputs of unequal sizes
// (one with a size-1 dim), in float64 and float32, contiguous or not (permuted, sliced with an offset and steps, or
// both). Gradient checks and CPU-vs-CUDA parity cannot see a forward that puts its results in the wrong order.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <numbers>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe {
namespace {

using testing::random_double;
using Index = std::vector<int64_t>;

template <typename... A>
std::string str(const A&... a) {
  std::ostringstream os;
  (os << ... << a);
  return os.str();
}

// ---- multi-indices and reference tensors ----

int64_t ravel(const Index& i, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + i[d];
  return f;
}

// f(index) for every multi-index of `shape`, in row-major order.
template <typename F>
void for_each_index(const Shape& shape, F&& f) {
  Index i(shape.size(), 0);
  for (int64_t k = 0, n = shape_numel(shape); k < n; ++k) {
    f(static_cast<const Index&>(i));
    for (int64_t d = int64_t(shape.size()) - 1; d >= 0 && ++i[d] == shape[d]; --d) i[d] = 0;
  }
}

Shape erased(Shape s, int64_t d) {
  s.erase(s.begin() + d);
  return s;
}
Shape inserted(Shape s, int64_t d, int64_t v) {
  s.insert(s.begin() + d, v);
  return s;
}
Shape with(Shape s, int64_t d, int64_t v) {
  s[d] = v;
  return s;
}
Shape ones_at(Shape s, int64_t mask) {  // size 1 where bit d of mask is set
  for (size_t d = 0; d < s.size(); ++d)
    if ((mask >> d) & 1) s[d] = 1;
  return s;
}

// Reference values: a shape and its elements in row-major order, in double.
struct Ref {
  Shape shape;
  std::vector<double> v;
  Ref() = default;
  explicit Ref(Shape s, double fill = 0.0) : shape(std::move(s)), v(size_t(shape_numel(shape)), fill) {}
  double& operator[](const Index& i) { return v[ravel(i, shape)]; }
  double operator[](const Index& i) const { return v[ravel(i, shape)]; }
  // x at index o of a broadcast result (o has at least as many dims; size-1 dims of x read index 0).
  double bcast(const Index& o) const {
    Index i(shape.size());
    for (size_t d = 0; d < shape.size(); ++d) i[d] = shape[d] == 1 ? 0 : o[o.size() - shape.size() + d];
    return (*this)[i];
  }
};

// The same elements under another shape of equal size: row-major order is what reshape and (un)squeeze keep.
Ref reshaped(Ref r, Shape s) {
  r.shape = std::move(s);
  return r;
}

// The values of x along dim d through index i (i[d] ignored).
std::vector<double> line(const Ref& x, Index i, int64_t d) {
  std::vector<double> v;
  for (i[d] = 0; i[d] < x.shape[d]; ++i[d]) v.push_back(x[i]);
  return v;
}

// ---- inputs: random views with known values ----

enum class Layout { Contiguous, Permuted, Sliced, PermutedSliced };
constexpr Layout kLayouts[] = {Layout::Contiguous, Layout::Permuted, Layout::Sliced, Layout::PermutedSliced};
const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Permuted: return "permuted";
    case Layout::Sliced: return "sliced";
    case Layout::PermutedSliced: return "permuted+sliced";
  }
  return "?";
}
Layout next_layout(Layout l, int k = 1) { return kLayouts[(int(l) + k) % 4]; }

// An op input: a view `t` of a fresh base tensor, and its values computed from the base by explicit index
// arithmetic (never through the library's strides); element k (row-major) of the view is element at[k] of the base.
struct Input {
  Tensor t, base;
  Ref ref;
  std::vector<int64_t> at;
};

// Logical shape s in `layout`. Permuted: dim i of the view is dim (i + 1) % n of a contiguous base. Sliced: along
// every base dim the view starts at 1 of a larger base, with step 2 along the first and last base dims.
Input make_input(const Shape& s, Layout layout, const std::function<Tensor(const Shape&)>& make_base) {
  const int64_t n = int64_t(s.size());
  const bool permuted = layout == Layout::Permuted || layout == Layout::PermutedSliced;
  const bool sliced = layout == Layout::Sliced || layout == Layout::PermutedSliced;
  Shape perm(n), pre(n), start(n, 0), step(n, 1);
  for (int64_t i = 0; i < n; ++i) perm[i] = permuted ? (i + 1) % n : i;
  for (int64_t i = 0; i < n; ++i) pre[perm[i]] = s[i];
  Shape bshape = pre;
  for (int64_t j = 0; sliced && j < n; ++j) {
    start[j] = 1;
    step[j] = (j == 0 || j == n - 1) ? 2 : 1;
    bshape[j] = start[j] + step[j] * pre[j] + 1;
  }
  Input in;
  in.base = make_base(bshape);
  in.t = in.base;
  for (int64_t j = 0; sliced && j < n; ++j) in.t = in.t.slice(j, start[j], start[j] + step[j] * pre[j], step[j]);
  if (permuted) in.t = in.t.permute(perm);
  const std::vector<double> bv = in.base.detach().to(DType::Float64).to_vector<double>();
  in.ref = Ref(s);
  Index b(n);
  for_each_index(s, [&](const Index& i) {
    for (int64_t d = 0; d < n; ++d) b[perm[d]] = start[perm[d]] + step[perm[d]] * i[d];
    in.at.push_back(ravel(b, bshape));
    in.ref[i] = bv[in.at.back()];
  });
  return in;
}

const std::vector<Shape> kShapes = {{4, 3, 5}, {3, 2, 4, 5}, {2, 5, 1, 3}};

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
  Input input(const Shape& s, uint64_t salt = 0, bool positive = false, bool grad = false) const {
    return make_input(s, layout, [&](const Shape& b) {
      Tensor t = random_double(b, seed * 64 + salt, positive).to(dtype).detach();
      return grad ? t.requires_grad_() : t;
    });
  }
  Input zeros_input(const Shape& s) const {
    return make_input(s, layout, [&](const Shape& b) { return zeros(b, TensorOptions{}.with_dtype(dtype)); });
  }
  Input bool_input(const Shape& s, uint64_t salt) const {
    return make_input(s, layout, [&](const Shape& b) {
      const Tensor r = random_double(b, seed * 64 + salt);
      return ops::gt(r, ops::scalar_like(0.0, r));
    });
  }
  // Random int64 indices in [0, high).
  Input index(const Shape& s, int64_t high, uint64_t salt = 0) const {
    return make_input(s, layout, [&](const Shape& b) {
      Generator g(seed * 64 + salt);
      return randint(0, high, b, TensorOptions{}.with_dtype(DType::Int64), &g);
    });
  }
  Case in(Layout l) const { return {shape, l, dtype, seed}; }
};

std::vector<Case> all_cases(const std::vector<Shape>& shapes = kShapes) {
  std::vector<Case> cases;
  uint64_t seed = 1;
  for (const Shape& s : shapes)
    for (Layout l : kLayouts)
      for (DType t : {DType::Float64, DType::Float32}) cases.push_back({s, l, t, seed++});
  return cases;
}

// Every dim of an n-D tensor, then each again by its negative alias.
std::vector<int64_t> all_dims(int64_t n) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < n; ++d) dims.push_back(d);
  for (int64_t d = 0; d < n; ++d) dims.push_back(d - n);
  return dims;
}
int64_t wrap(int64_t d, int64_t n) { return d < 0 ? d + n : d; }

// ---- comparison ----

int64_t g_checks = 0;  // tensors compared by the current test

// got has want's shape and values within tol * (1 + |want|); `what` names the op, dims and input on failure.
void expect_matches(const Tensor& got, const Ref& want, double tol, const std::string& what) {
  ++g_checks;
  if (got.shape() != want.shape) {
    ADD_FAILURE() << what << ": shape " << shape_str(got.shape()) << ", want " << shape_str(want.shape);
    return;
  }
  const std::vector<double> g = got.detach().to(DType::Float64).to_vector<double>();
  int64_t bad = 0;
  Index first;
  double first_got = 0, first_want = 0;
  for_each_index(want.shape, [&](const Index& i) {
    const double a = g[ravel(i, want.shape)], w = want[i];
    if (std::fabs(a - w) <= tol * (1 + std::fabs(w))) return;
    if (bad++ == 0) {
      first = i;
      first_got = a;
      first_want = w;
    }
  });
  if (bad > 0)
    ADD_FAILURE() << what << ": " << bad << " of " << g.size() << " elements differ; first at " << shape_str(first)
                  << ": got " << first_got << ", want " << first_want;
}

class ReferenceOps : public ::testing::Test {
 protected:
  void SetUp() override { g_checks = 0; }
  void TearDown() override { RecordProperty("comparisons", int(g_checks)); }
};

// ---- reference loops, one per op family ----

// sum (or mean) over the dims set in mask.
Ref reduce_ref(const Ref& x, const std::vector<bool>& mask, bool keepdim, bool mean) {
  Shape keep = x.shape, kept;
  for (size_t d = 0; d < keep.size(); ++d)
    if (mask[d])
      keep[d] = 1;
    else
      kept.push_back(keep[d]);
  Ref out(keep);
  for_each_index(x.shape, [&](const Index& i) {
    Index o = i;
    for (size_t d = 0; d < o.size(); ++d)
      if (mask[d]) o[d] = 0;
    out[o] += x[i];
  });
  if (mean)
    for (double& e : out.v) e /= double(x.v.size()) / double(out.v.size());
  return keepdim ? out : reshaped(out, kept);
}

// (max or min, its first index) along d.
std::pair<Ref, Ref> extreme_ref(const Ref& x, int64_t d, bool keepdim, bool is_max) {
  const Shape keep = with(x.shape, d, 1);
  Ref val(keep), arg(keep);
  for_each_index(keep, [&](const Index& o) {
    const std::vector<double> l = line(x, o, d);
    const auto it = is_max ? std::max_element(l.begin(), l.end()) : std::min_element(l.begin(), l.end());
    val[o] = *it;
    arg[o] = double(it - l.begin());
  });
  if (keepdim) return {val, arg};
  return {reshaped(val, erased(x.shape, d)), reshaped(arg, erased(x.shape, d))};
}

Ref softmax_ref(const Ref& x, int64_t d, bool log) {
  Ref out(x.shape);
  for_each_index(with(x.shape, d, 1), [&](Index i) {
    const std::vector<double> l = line(x, i, d);
    const double mx = *std::max_element(l.begin(), l.end());
    double s = 0;
    for (double e : l) s += std::exp(e - mx);
    for (i[d] = 0; i[d] < x.shape[d]; ++i[d]) out[i] = log ? x[i] - mx - std::log(s) : std::exp(x[i] - mx) / s;
  });
  return out;
}

// (values, indices) of the k largest (or smallest) along d, sorted.
std::pair<Ref, Ref> topk_ref(const Ref& x, int64_t k, int64_t d, bool largest) {
  Ref val(with(x.shape, d, k)), idx(with(x.shape, d, k));
  for_each_index(with(x.shape, d, 1), [&](Index i) {
    const std::vector<double> l = line(x, i, d);
    std::vector<int64_t> order(l.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return largest ? l[a] > l[b] : l[a] < l[b]; });
    for (i[d] = 0; i[d] < k; ++i[d]) {
      val[i] = l[order[i[d]]];
      idx[i] = double(order[i[d]]);
    }
  });
  return {val, idx};
}

// Elements start, start + step, ... (len of them) along d.
Ref sub_ref(const Ref& x, int64_t d, int64_t start, int64_t step, int64_t len) {
  Ref out(with(x.shape, d, len));
  for_each_index(out.shape, [&](const Index& i) {
    Index j = i;
    j[d] = start + step * i[d];
    out[i] = x[j];
  });
  return out;
}

// out[i] = x[j] with j[p[k]] = i[k].
Ref permute_ref(const Ref& x, const Shape& p) {
  Shape s(p.size());
  for (size_t k = 0; k < p.size(); ++k) s[k] = x.shape[p[k]];
  Ref out(s);
  Index j(p.size());
  for_each_index(s, [&](const Index& i) {
    for (size_t k = 0; k < p.size(); ++k) j[p[k]] = i[k];
    out[i] = x[j];
  });
  return out;
}

Shape broadcast(const Shape& a, const Shape& b) {
  Shape s(std::max(a.size(), b.size()), 1);
  for (size_t k = 0; k < s.size(); ++k) {
    const int64_t x = k < a.size() ? a[a.size() - 1 - k] : 1, y = k < b.size() ? b[b.size() - 1 - k] : 1;
    s[s.size() - 1 - k] = x == 1 ? y : x;
  }
  return s;
}

Ref binary_ref(const Ref& a, const Ref& b, const std::function<double(double, double)>& f) {
  Ref out(broadcast(a.shape, b.shape));
  for_each_index(out.shape, [&](const Index& i) { out[i] = f(a.bcast(i), b.bcast(i)); });
  return out;
}

// a [..., M, K] (or [K]) times b [..., K, N] (or [K]) with broadcast batch dims.
Ref matmul_ref(const Ref& a_in, const Ref& b_in) {
  const Ref a = a_in.shape.size() == 1 ? reshaped(a_in, {1, a_in.shape[0]}) : a_in;
  const Ref b = b_in.shape.size() == 1 ? reshaped(b_in, {b_in.shape[0], 1}) : b_in;
  const int64_t M = a.shape.end()[-2], K = a.shape.back(), N = b.shape.back();
  Shape out_shape = broadcast(Shape(a.shape.begin(), a.shape.end() - 2), Shape(b.shape.begin(), b.shape.end() - 2));
  out_shape.push_back(M);
  out_shape.push_back(N);
  Ref out(out_shape);
  for_each_index(out_shape, [&](const Index& o) {
    // a and b at batch o and rows/cols (m, k) / (k, n): broadcast reads with the last two coordinates replaced
    Index ia = o, ib = o;
    double acc = 0;
    for (int64_t k = 0; k < K; ++k) {
      ia.back() = k;
      ib.end()[-2] = k;
      Index ta(a.shape.size()), tb(b.shape.size());
      for (size_t d = 0; d < a.shape.size(); ++d) {
        const int64_t v = ia[ia.size() - a.shape.size() + d];
        ta[d] = (d + 2 < a.shape.size() && a.shape[d] == 1) ? 0 : v;
      }
      for (size_t d = 0; d < b.shape.size(); ++d) {
        const int64_t v = ib[ib.size() - b.shape.size() + d];
        tb[d] = (d + 2 < b.shape.size() && b.shape[d] == 1) ? 0 : v;
      }
      acc += a[ta] * b[tb];
    }
    out[o] = acc;
  });
  Shape s = out_shape;
  if (a_in.shape.size() == 1) s.erase(s.end() - 2);
  if (b_in.shape.size() == 1) s.pop_back();
  return reshaped(out, s);
}

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
constexpr double kTanhC = 0.7978845608028654, kTanhA = 0.044715;  // sqrt(2/pi) and the cubic coefficient
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(kTanhC * (x + kTanhA * x * x * x))); }
double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

// ==== tests ====

TEST_F(ReferenceOps, SumAndMeanOverEverySubsetOfDims) {
  for (const Case& c : all_cases()) {
    const Input x = c.input(c.shape);
    const int64_t n = c.n();
    for (int64_t m = 0; m < (int64_t(1) << n); ++m) {  // m = 0: dims {} (all)
      Shape dims;
      std::vector<bool> mask(n, m == 0);
      for (int64_t d = n - 1; d >= 0; --d)  // listed last first, every other one by its negative alias
        if ((m >> d) & 1) {
          dims.push_back((d + m) % 2 ? d - n : d);
          mask[d] = true;
        }
      for (bool keepdim : {false, true}) {
        const std::string what = str("dims ", shape_str(dims), " keepdim ", keepdim, " of ", c.name());
        expect_matches(ops::sum(x.t, dims, keepdim), reduce_ref(x.ref, mask, keepdim, false), c.tol(), "sum " + what);
        expect_matches(ops::mean(x.t, dims, keepdim), reduce_ref(x.ref, mask, keepdim, true), c.tol(), "mean " + what);
      }
    }
    const std::vector<bool> all(n, true);
    expect_matches(ops::sum(x.t), reduce_ref(x.ref, all, false, false), c.tol(), "sum(x) of " + c.name());
    expect_matches(ops::mean(x.t), reduce_ref(x.ref, all, false, true), c.tol(), "mean(x) of " + c.name());
  }
}

TEST_F(ReferenceOps, MaxMinArgmaxOverEveryDim) {
  for (const Case& c : all_cases())
    for (bool grad : {false, true}) {  // with grad, the values are gathered at the indices
      const Input x = c.input(c.shape, 0, false, grad);
      for (int64_t d : all_dims(c.n()))
        for (bool keepdim : {false, true}) {
          const std::string what = str(" dim ", d, " keepdim ", keepdim, " grad ", grad, " of ", c.name());
          const auto [mx, arg] = extreme_ref(x.ref, wrap(d, c.n()), keepdim, true);
          const auto [mn, argmin] = extreme_ref(x.ref, wrap(d, c.n()), keepdim, false);
          expect_matches(ops::max(x.t, d, keepdim), mx, 0, "max" + what);
          expect_matches(ops::min(x.t, d, keepdim), mn, 0, "min" + what);
          expect_matches(ops::argmax(x.t, d, keepdim), arg, 0, "argmax" + what);
          // argmin through argmax of the negation
          expect_matches(ops::argmax(ops::neg(x.t), d, keepdim), argmin, 0, "argmax(-x)" + what);
        }
      const Ref flat = reshaped(x.ref, {int64_t(x.ref.v.size())});
      expect_matches(ops::max(x.t), extreme_ref(flat, 0, false, true).first, 0, "max(x) of " + c.name());
      expect_matches(ops::min(x.t), extreme_ref(flat, 0, false, false).first, 0, "min(x) of " + c.name());
    }
}

TEST_F(ReferenceOps, SoftmaxAndLogSoftmaxOverEveryDim) {
  for (const Case& c : all_cases()) {
    const Input x = c.input(c.shape);
    for (int64_t d : all_dims(c.n())) {
      const std::string what = str(" dim ", d, " of ", c.name());
      expect_matches(ops::softmax(x.t, d), softmax_ref(x.ref, wrap(d, c.n()), false), c.tol(), "softmax" + what);
      expect_matches(ops::log_softmax(x.t, d), softmax_ref(x.ref, wrap(d, c.n()), true), c.tol(), "log_softmax" + what);
    }
  }
}

TEST_F(ReferenceOps, TopkOverEveryDim) {
  for (const Case& c : all_cases())
    for (bool grad : {false, true}) {
      const Input x = c.input(c.shape, 0, false, grad);
      for (int64_t d : all_dims(c.n())) {
        const int64_t size = c.shape[wrap(d, c.n())];
        std::vector<int64_t> ks = {1, (size + 1) / 2, size};
        ks.erase(std::unique(ks.begin(), ks.end()), ks.end());
        for (int64_t k : ks)
          for (bool largest : {true, false}) {
            const std::string what = str(" k ", k, " dim ", d, " largest ", largest, " grad ", grad, " of ", c.name());
            const auto [val, idx] = ops::topk(x.t, k, d, largest);
            const auto [want_val, want_idx] = topk_ref(x.ref, k, wrap(d, c.n()), largest);
            expect_matches(val, want_val, 0, "topk values" + what);
            expect_matches(idx, want_idx, 0, "topk indices" + what);
          }
      }
    }
}

TEST_F(ReferenceOps, GatherAndScatterAddOverEveryDim) {
  for (const Case& c : all_cases())
    for (int64_t d : all_dims(c.n())) {
      const int64_t w = wrap(d, c.n());
      // index: longer than x along d (repeats), shorter than x in the other dims; src larger than index
      Shape is = with(c.shape, w, c.shape[w] + 2), ss;
      for (int64_t e = 0; e < c.n(); ++e)
        if (e != w && is[e] > 1) --is[e];
      for (int64_t e : is) ss.push_back(e + 1);
      const Input x = c.input(c.shape), idx = c.index(is, c.shape[w], 1), src = c.input(ss, 2);
      const std::string what = str(" dim ", d, " index ", shape_str(is), " of ", c.name());
      Ref gathered(is), scattered = x.ref;
      for_each_index(is, [&](const Index& i) {
        Index j = i;
        j[w] = int64_t(idx.ref[i]);
        gathered[i] = x.ref[j];
        scattered[j] += src.ref[i];
      });
      expect_matches(ops::gather(x.t, d, idx.t), gathered, 0, "gather" + what);
      expect_matches(ops::scatter_add(x.t, d, idx.t, src.t), scattered, c.tol(), "scatter_add" + what);
    }
}

TEST_F(ReferenceOps, IndexSelectIndexAddEmbedding) {
  for (const Case& c : all_cases()) {
    for (int64_t d : all_dims(c.n())) {
      const int64_t w = wrap(d, c.n()), m = c.shape[w] + 2;
      const Input x = c.input(c.shape), idx = c.index({m}, c.shape[w], 1), src = c.input(with(c.shape, w, m), 2);
      const std::string what = str(" dim ", d, " of ", c.name());
      Ref selected(with(c.shape, w, m)), added = x.ref;
      for_each_index(selected.shape, [&](const Index& i) {
        Index j = i;
        j[w] = int64_t(idx.ref.v[i[w]]);
        selected[i] = x.ref[j];
        added[j] += src.ref[i];
      });
      expect_matches(ops::index_select(x.t, d, idx.t), selected, 0, "index_select" + what);
      expect_matches(ops::index_add(x.t, d, idx.t, src.t), added, c.tol(), "index_add" + what);
    }
    // embedding: weight [7, 5] in the case's layout, ids of the case's shape without its last dim
    const Input weight = c.input({7, 5}, 3), ids = c.index(erased(c.shape, c.n() - 1), 7, 4);
    Ref want(inserted(ids.ref.shape, int64_t(ids.ref.shape.size()), 5));
    for_each_index(want.shape, [&](const Index& i) {
      want[i] = weight.ref[{int64_t(ids.ref[Index(i.begin(), i.end() - 1)]), i.back()}];
    });
    expect_matches(ops::embedding(weight.t, ids.t), want, 0, "embedding of " + c.name());
  }
}

TEST_F(ReferenceOps, CatStackSplitNarrowSliceSelectOverEveryDim) {
  for (const Case& c : all_cases()) {
    const int64_t n = c.n();
    const Input x = c.input(c.shape);
    for (int64_t d : all_dims(n)) {
      const int64_t w = wrap(d, n), size = c.shape[w];
      const std::string what = str(" dim ", d, " of ", c.name());
      // cat: three parts of sizes size, 1, size + 1 along d, each in another layout
      std::vector<Input> parts;
      std::vector<Tensor> ts;
      const int64_t sizes[] = {size, 1, size + 1};
      for (int64_t k = 0; k < 3; ++k) {
        parts.push_back(c.in(next_layout(c.layout, int(k))).input(with(c.shape, w, sizes[k]), 1 + uint64_t(k)));
        ts.push_back(parts.back().t);
      }
      Ref cat(with(c.shape, w, 2 * size + 2));
      for (int64_t k = 0, off = 0; k < 3; off += parts[k].ref.shape[w], ++k)
        for_each_index(parts[k].ref.shape, [&](const Index& i) {
          Index o = i;
          o[w] += off;
          cat[o] = parts[k].ref[i];
        });
      expect_matches(ops::cat(ts, d), cat, 0, "cat" + what);
      // split into equal sizes (the last one shorter) and into given sizes (one empty)
      std::vector<int64_t> split_sizes = {1, 2, size};
      split_sizes.erase(std::unique(split_sizes.begin(), split_sizes.end()), split_sizes.end());
      for (int64_t ss : split_sizes) {
        const std::vector<Tensor> got = ops::split(x.t, ss, d);
        EXPECT_EQ(int64_t(got.size()), (size + ss - 1) / ss) << "split size " << ss << what;
        for (int64_t p = 0; p < std::min(int64_t(got.size()), (size + ss - 1) / ss); ++p)
          expect_matches(got[p], sub_ref(x.ref, w, p * ss, 1, std::min(ss, size - p * ss)), 0,
                         str("split size ", ss, " part ", p, what));
      }
      const std::vector<Tensor> got = ops::split(x.t, std::vector<int64_t>{size - 1, 0, 1}, d);
      EXPECT_EQ(got.size(), 3u) << "split sizes" << what;
      if (got.size() == 3u) {
        expect_matches(got[0], sub_ref(x.ref, w, 0, 1, size - 1), 0, "split sizes part 0" + what);
        expect_matches(got[1], sub_ref(x.ref, w, 0, 1, 0), 0, "split sizes part 1" + what);
        expect_matches(got[2], sub_ref(x.ref, w, size - 1, 1, 1), 0, "split sizes part 2" + what);
      }
      // the views along d
      const int64_t start = size > 1 ? 1 : 0;
      expect_matches(x.t.narrow(d, start, size - start), sub_ref(x.ref, w, start, 1, size - start), 0, "narrow" + what);
      expect_matches(x.t.slice(d, start, size, 2), sub_ref(x.ref, w, start, 2, (size - start + 1) / 2), 0,
                     "slice step 2" + what);
      expect_matches(x.t.slice(d, -1, size), sub_ref(x.ref, w, size - 1, 1, 1), 0, "slice from -1" + what);
      expect_matches(x.t.select(d, -1), reshaped(sub_ref(x.ref, w, size - 1, 1, 1), erased(c.shape, w)), 0,
                     "select -1" + what);
      expect_matches(x.t.select(d, 0), reshaped(sub_ref(x.ref, w, 0, 1, 1), erased(c.shape, w)), 0, "select 0" + what);
    }
    // stack of three inputs (in three layouts) at every position of the result, also negative
    std::vector<Input> parts;
    std::vector<Tensor> ts;
    for (int k = 0; k < 3; ++k) {
      parts.push_back(c.in(next_layout(c.layout, k)).input(c.shape, 5 + k));
      ts.push_back(parts.back().t);
    }
    for (int64_t d : all_dims(n + 1)) {
      const int64_t w = wrap(d, n + 1);
      Ref want(inserted(c.shape, w, 3));
      for_each_index(want.shape, [&](const Index& o) { want[o] = parts[o[w]].ref[erased(o, w)]; });
      expect_matches(ops::stack(ts, d), want, 0, str("stack dim ", d, " of ", c.name()));
    }
  }
}

TEST_F(ReferenceOps, ViewsAndCopies) {
  for (const Case& c : all_cases()) {
    const int64_t n = c.n();
    const Input x = c.input(c.shape);
    const std::string of = " of " + c.name();
    EXPECT_EQ(x.t.is_contiguous(), c.layout == Layout::Contiguous) << of;
    expect_matches(x.t, x.ref, 0, "the view itself" + of);
    expect_matches(x.t.contiguous(), x.ref, 0, "contiguous" + of);
    expect_matches(x.t.clone(), x.ref, 0, "clone" + of);
    const DType other = c.dtype == DType::Float64 ? DType::Float32 : DType::Float64;
    expect_matches(x.t.to(other), x.ref, 1e-6, "to(other float)" + of);
    // transpose of every pair (negative dims too), permute by every permutation (one entry negative)
    for (int64_t d0 : all_dims(n))
      for (int64_t d1 : all_dims(n)) {
        Shape p(n);
        std::iota(p.begin(), p.end(), 0);
        std::swap(p[wrap(d0, n)], p[wrap(d1, n)]);
        expect_matches(x.t.transpose(d0, d1), permute_ref(x.ref, p), 0, str("transpose(", d0, ", ", d1, ")", of));
      }
    Shape p(n);
    std::iota(p.begin(), p.end(), 0);
    do {
      Shape q = p;
      q[0] -= n;
      expect_matches(x.t.permute(q), permute_ref(x.ref, p), 0, str("permute ", shape_str(q), of));
      expect_matches(x.t.permute(q).contiguous().reshape({-1}),
                     reshaped(permute_ref(x.ref, p), {int64_t(x.ref.v.size())}), 0,
                     str("permute ", shape_str(q), " flattened", of));
    } while (std::next_permutation(p.begin(), p.end()));
    // reshape (a view where the strides allow, else a copy) to many shapes, and back
    std::vector<Shape> targets = {{-1}, Shape(c.shape.rbegin(), c.shape.rend())};
    for (int64_t k = 1; k < n; ++k) {
      const int64_t lead = shape_numel(Shape(c.shape.begin(), c.shape.begin() + k));
      targets.push_back({lead, -1});
      Shape merged = {-1};  // dims before k merged
      merged.insert(merged.end(), c.shape.begin() + k, c.shape.end());
      targets.push_back(merged);
    }
    for (int64_t d = 0; d < n; ++d) {  // dim d split in two, a 1 inserted before dim d
      Shape s = erased(c.shape, d);
      const int64_t a = c.shape[d] % 2 == 0 ? 2 : 1;
      s.insert(s.begin() + d, {a, c.shape[d] / a});
      targets.push_back(s);
      targets.push_back(inserted(c.shape, d, 1));
    }
    targets.push_back(inserted(c.shape, n, 1));
    for (const Shape& t : targets) {
      Shape s = t;
      int64_t known = 1;
      for (int64_t e : t) known *= e == -1 ? 1 : e;
      for (int64_t& e : s)
        if (e == -1) e = shape_numel(c.shape) / known;
      const Tensor y = x.t.reshape(t);
      expect_matches(y, reshaped(x.ref, s), 0, str("reshape ", shape_str(t), of));
      expect_matches(y.reshape(c.shape), x.ref, 0, str("reshape ", shape_str(t), " and back", of));
      if (x.t.is_contiguous()) expect_matches(x.t.view(t), reshaped(x.ref, s), 0, str("view ", shape_str(t), of));
    }
    for (int64_t a = 0; a < n; ++a)
      for (int64_t b = a; b < n; ++b) {
        Shape s(c.shape.begin(), c.shape.begin() + a);
        s.push_back(shape_numel(Shape(c.shape.begin() + a, c.shape.begin() + b + 1)));
        s.insert(s.end(), c.shape.begin() + b + 1, c.shape.end());
        expect_matches(x.t.flatten(a, b), reshaped(x.ref, s), 0, str("flatten(", a, ", ", b, ")", of));
        expect_matches(x.t.flatten(a - n, b - n), reshaped(x.ref, s), 0, str("flatten(", a - n, ", ", b - n, ")", of));
      }
    for (int64_t d : all_dims(n + 1)) {
      const Ref u = reshaped(x.ref, inserted(c.shape, wrap(d, n + 1), 1));
      expect_matches(x.t.unsqueeze(d), u, 0, str("unsqueeze(", d, ")", of));
      expect_matches(x.t.unsqueeze(d).squeeze(d), x.ref, 0, str("unsqueeze(", d, ").squeeze(", d, ")", of));
      expect_matches(x.t.unsqueeze(d).contiguous(), u, 0, str("unsqueeze(", d, ").contiguous()", of));
    }
    for (int64_t d : all_dims(n)) {
      const int64_t w = wrap(d, n);
      expect_matches(x.t.squeeze(d), c.shape[w] == 1 ? reshaped(x.ref, erased(c.shape, w)) : x.ref, 0,
                     str("squeeze(", d, ")", of));
    }
    // expand of size-1 dims in every position, and of a new leading dim
    for (int64_t m = 1; m < (int64_t(1) << n); ++m) {
      const Input e = c.input(ones_at(c.shape, m), 1);
      const Ref want = binary_ref(e.ref, Ref(c.shape), [](double a, double) { return a; });
      expect_matches(e.t.expand(c.shape), want, 0,
                     str("expand ", shape_str(e.ref.shape), " to ", shape_str(c.shape), of));
      expect_matches(e.t.expand(inserted(c.shape, 0, 2)).select(0, 1), want, 0,
                     str("expand ", shape_str(e.ref.shape), " with a new leading dim", of));
    }
    // in-place writes through a view (of another layout) into its base
    const Case cd = c.in(next_layout(c.layout));
    const Input y = cd.input(c.shape, 2), z = c.input(ones_at(c.shape, 1), 3);
    Input dst = cd.zeros_input(c.shape);
    Ref base(dst.base.shape());
    dst.t.copy_(x.t);
    for (size_t k = 0; k < dst.at.size(); ++k) base.v[dst.at[k]] = x.ref.v[k];
    expect_matches(dst.base, base, 0, "copy_ into a view" + of);
    dst.t.add_(y.t);
    for (size_t k = 0; k < dst.at.size(); ++k) base.v[dst.at[k]] += y.ref.v[k];
    expect_matches(dst.base, base, c.tol(), "add_ into a view" + of);
    dst.t.mul_(z.t);  // broadcast along dim 0
    for_each_index(c.shape, [&](const Index& i) { base.v[dst.at[ravel(i, c.shape)]] *= z.ref.bcast(i); });
    expect_matches(dst.base, base, c.tol(), "mul_ (broadcast) into a view" + of);
    dst.t.fill_(0.5);
    for (int64_t k : dst.at) base.v[k] = 0.5;
    expect_matches(dst.base, base, 0, "fill_ into a view" + of);
  }
}

struct BinaryOp {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  std::function<double(double, double)> ref;
};

const std::vector<BinaryOp> kBinary = {
    {"add", [](const Tensor& a, const Tensor& b) { return ops::add(a, b); }, [](double a, double b) { return a + b; }},
    {"sub", [](const Tensor& a, const Tensor& b) { return ops::sub(a, b); }, [](double a, double b) { return a - b; }},
    {"mul", [](const Tensor& a, const Tensor& b) { return ops::mul(a, b); }, [](double a, double b) { return a * b; }},
    {"div", [](const Tensor& a, const Tensor& b) { return ops::div(a, b); }, [](double a, double b) { return a / b; }},
    {"pow", [](const Tensor& a, const Tensor& b) { return ops::pow(a, b); },
     [](double a, double b) { return std::pow(a, b); }},
    {"eq", [](const Tensor& a, const Tensor& b) { return ops::eq(a, b); },
     [](double a, double b) { return double(a == b); }},
    {"ne", [](const Tensor& a, const Tensor& b) { return ops::ne(a, b); },
     [](double a, double b) { return double(a != b); }},
    {"lt", [](const Tensor& a, const Tensor& b) { return ops::lt(a, b); },
     [](double a, double b) { return double(a < b); }},
    {"le", [](const Tensor& a, const Tensor& b) { return ops::le(a, b); },
     [](double a, double b) { return double(a <= b); }},
    {"gt", [](const Tensor& a, const Tensor& b) { return ops::gt(a, b); },
     [](double a, double b) { return double(a > b); }},
    {"ge", [](const Tensor& a, const Tensor& b) { return ops::ge(a, b); },
     [](double a, double b) { return double(a >= b); }},
};

TEST_F(ReferenceOps, BroadcastingBinaryOpsWhereAndSumTo) {
  for (const Case& c : all_cases()) {
    const int64_t n = c.n(), masks = int64_t(1) << n;
    // a: positive (pow), b: N(0, 1); size 1 in every subset of positions, and fewer dims
    std::vector<Input> as, bs, conds;
    for (int64_t m = 0; m < masks; ++m) {
      as.push_back(c.input(ones_at(c.shape, m), 10 + uint64_t(m), true));
      bs.push_back(c.in(next_layout(c.layout)).input(ones_at(c.shape, m), 30 + uint64_t(m)));
      conds.push_back(c.in(next_layout(c.layout, 2)).bool_input(ones_at(c.shape, m), 50 + uint64_t(m)));
    }
    auto check = [&](const Input& a, const Input& b, const Input& cond) {
      const std::string what = str(" ", shape_str(a.ref.shape), " and ", shape_str(b.ref.shape), " of ", c.name());
      for (const BinaryOp& op : kBinary)
        expect_matches(op.fn(a.t, b.t), binary_ref(a.ref, b.ref, op.ref), c.tol(), op.name + what);
      const Ref ab = binary_ref(a.ref, b.ref, [](double, double) { return 0.0; });
      Ref want(broadcast(cond.ref.shape, ab.shape));
      for_each_index(want.shape,
                     [&](const Index& i) { want[i] = cond.ref.bcast(i) != 0 ? a.ref.bcast(i) : b.ref.bcast(i); });
      expect_matches(ops::where(cond.t, a.t, b.t), want, 0, str("where cond ", shape_str(cond.ref.shape), what));
    };
    for (int64_t ma = 0; ma < masks; ++ma)
      for (int64_t mb = 0; mb < masks; ++mb) check(as[ma], bs[mb], conds[ma ^ mb]);
    for (int64_t k = 0; k < n; ++k) {  // b (then a) with only the last k dims
      const Shape tail(c.shape.end() - k, c.shape.end());
      const Input a = c.input(tail, 70 + uint64_t(k), true), b = c.input(tail, 80 + uint64_t(k));
      check(as[0], b, conds[0]);
      check(a, bs[0], conds[masks - 1]);
    }
    // sum_to: the inverse of broadcasting, to size-1 dims in every subset of positions and to fewer dims
    const Input x = c.input(c.shape, 90);
    for (int64_t m = 0; m < masks; ++m) {
      std::vector<bool> mask(n);
      for (int64_t d = 0; d < n; ++d) mask[d] = (m >> d) & 1;
      expect_matches(ops::sum_to(x.t, ones_at(c.shape, m)), reduce_ref(x.ref, mask, true, false), c.tol(),
                     str("sum_to ", shape_str(ones_at(c.shape, m)), " of ", c.name()));
    }
    for (int64_t k = 0; k < n; ++k) {
      std::vector<bool> mask(n, false);
      for (int64_t d = 0; d < n - k; ++d) mask[d] = true;
      const Shape tail(c.shape.end() - k, c.shape.end());
      expect_matches(ops::sum_to(x.t, tail), reduce_ref(x.ref, mask, false, false), c.tol(),
                     str("sum_to ", shape_str(tail), " of ", c.name()));
    }
  }
}

struct UnaryOp {
  const char* name;
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(double)> ref;
  bool positive = false;
};

const std::vector<UnaryOp> kUnary = {
    {"neg", [](const Tensor& x) { return ops::neg(x); }, [](double x) { return -x; }},
    {"exp", [](const Tensor& x) { return ops::exp(x); }, [](double x) { return std::exp(x); }},
    {"log", [](const Tensor& x) { return ops::log(x); }, [](double x) { return std::log(x); }, true},
    {"sqrt", [](const Tensor& x) { return ops::sqrt(x); }, [](double x) { return std::sqrt(x); }, true},
    {"rsqrt", [](const Tensor& x) { return ops::rsqrt(x); }, [](double x) { return 1 / std::sqrt(x); }, true},
    {"abs", [](const Tensor& x) { return ops::abs(x); }, [](double x) { return std::fabs(x); }},
    {"sign", [](const Tensor& x) { return ops::sign(x); }, [](double x) { return double((x > 0) - (x < 0)); }},
    {"tanh", [](const Tensor& x) { return ops::tanh(x); }, [](double x) { return std::tanh(x); }},
    {"sigmoid", [](const Tensor& x) { return ops::sigmoid(x); }, sigmoid_ref},
    {"relu", [](const Tensor& x) { return ops::relu(x); }, [](double x) { return std::max(x, 0.0); }},
    {"gelu", [](const Tensor& x) { return ops::gelu(x); }, gelu_ref},
    {"gelu tanh", [](const Tensor& x) { return ops::gelu(x, true); }, gelu_tanh_ref},
    {"silu", [](const Tensor& x) { return ops::silu(x); }, [](double x) { return x * sigmoid_ref(x); }},
    {"pow(x, 3)", [](const Tensor& x) { return ops::pow(x, 3.0); }, [](double x) { return x * x * x; }},
    {"pow(x, 0.5)", [](const Tensor& x) { return ops::pow(x, 0.5); }, [](double x) { return std::sqrt(x); }, true},
    {"x * 2 - 1", [](const Tensor& x) { return x * 2.0 - 1.0; }, [](double x) { return x * 2 - 1; }},
    {"1 - x / 4", [](const Tensor& x) { return 1.0 - x / 4.0; }, [](double x) { return 1 - x / 4; }},
};

TEST_F(ReferenceOps, ElementwiseOnEveryLayout) {
  for (const Case& c : all_cases()) {
    const Input x = c.input(c.shape), xp = c.input(c.shape, 1, true), g = c.in(next_layout(c.layout)).input(c.shape, 2);
    for (const UnaryOp& op : kUnary) {
      const Input& in = op.positive ? xp : x;
      Ref want(c.shape);
      for (size_t k = 0; k < want.v.size(); ++k) want.v[k] = op.ref(in.ref.v[k]);
      expect_matches(op.fn(in.t), want, c.tol(), str(op.name, " of ", c.name()));
    }
    // the fused derivatives g * f'(x)
    const auto gelu_d = [](double v) {
      return 0.5 * (1 + std::erf(v / std::sqrt(2.0))) + v * std::exp(-v * v / 2) / std::sqrt(2 * std::numbers::pi);
    };
    const auto gelu_tanh_d = [](double v) {
      const double t = std::tanh(kTanhC * (v + kTanhA * v * v * v));
      return 0.5 * (1 + t) + 0.5 * v * (1 - t * t) * kTanhC * (1 + 3 * kTanhA * v * v);
    };
    const auto silu_d = [](double v) { return sigmoid_ref(v) * (1 + v * (1 - sigmoid_ref(v))); };
    const auto derivative = [&](const std::function<double(double)>& f) {
      Ref want(c.shape);
      for (size_t k = 0; k < want.v.size(); ++k) want.v[k] = g.ref.v[k] * f(x.ref.v[k]);
      return want;
    };
    expect_matches(ops::gelu_backward(x.t, g.t, false), derivative(gelu_d), c.tol(), "gelu_backward of " + c.name());
    expect_matches(ops::gelu_backward(x.t, g.t, true), derivative(gelu_tanh_d), c.tol(),
                   "gelu_backward tanh of " + c.name());
    expect_matches(ops::silu_backward(x.t, g.t), derivative(silu_d), c.tol(), "silu_backward of " + c.name());
  }
}

TEST_F(ReferenceOps, MatmulWithBroadcastBatchesOnEveryLayout) {
  const std::vector<std::pair<Shape, Shape>> shapes = {{{2, 3, 4, 5}, {2, 3, 5, 6}},
                                                       {{2, 1, 4, 5}, {3, 5, 6}},
                                                       {{4, 5}, {3, 2, 5, 6}},
                                                       {{3, 4, 5}, {1, 5, 6}},
                                                       {{3, 4, 5}, {5, 2}},
                                                       {{2, 3, 4, 5}, {1, 3, 5, 2}},
                                                       {{3, 4, 5}, {5}},
                                                       {{5}, {2, 5, 3}},
                                                       {{1, 4, 5}, {3, 1, 5, 2}},
                                                       {{4, 5}, {5, 3}},
                                                       {{5}, {5}}};
  for (const Case& c : all_cases({{1}}))
    for (const auto& [sa, sb] : shapes) {
      const Input a = c.input(sa, 1), b = c.in(next_layout(c.layout)).input(sb, 2);
      expect_matches(ops::matmul(a.t, b.t), matmul_ref(a.ref, b.ref), c.tol(),
                     str("matmul ", shape_str(sa), " ", layout_name(c.layout), " x ", shape_str(sb), " ",
                         layout_name(next_layout(c.layout)), " ", dtype_name(c.dtype)));
    }
}

TEST_F(ReferenceOps, NormsCrossEntropyRopeAttentionOnEveryLayout) {
  for (const Case& c : all_cases()) {
    const int64_t V = c.shape.back();
    const Input x = c.input(c.shape), w = c.input({V}, 1), b = c.input({V}, 2);
    const double eps = 1e-5;
    Ref rms(c.shape), rms_w(c.shape), ln(c.shape), ln_wb(c.shape);
    for_each_index(erased(c.shape, c.n() - 1), [&](const Index& r) {
      Index i = r;
      i.push_back(0);
      const std::vector<double> l = line(x.ref, i, c.n() - 1);
      double sq = 0, mean = 0, var = 0;
      for (double e : l) {
        sq += e * e;
        mean += e;
      }
      mean /= double(V);
      for (double e : l) var += (e - mean) * (e - mean);
      const double rr = 1 / std::sqrt(sq / double(V) + eps), rl = 1 / std::sqrt(var / double(V) + eps);
      for (i.back() = 0; i.back() < V; ++i.back()) {
        rms[i] = x.ref[i] * rr;
        rms_w[i] = rms[i] * w.ref.v[i.back()];
        ln[i] = (x.ref[i] - mean) * rl;
        ln_wb[i] = ln[i] * w.ref.v[i.back()] + b.ref.v[i.back()];
      }
    });
    const std::string of = " of " + c.name();
    expect_matches(ops::rms_norm(x.t, Tensor(), eps), rms, c.tol(), "rms_norm" + of);
    expect_matches(ops::rms_norm(x.t, w.t, eps), rms_w, c.tol(), "rms_norm with weight" + of);
    expect_matches(ops::layer_norm(x.t, Tensor(), Tensor(), eps), ln, c.tol(), "layer_norm" + of);
    expect_matches(ops::layer_norm(x.t, w.t, b.t, eps), ln_wb, c.tol(), "layer_norm with weight and bias" + of);
    // cross_entropy over the last dim; ignore_index 0 drops the rows whose target is 0
    const Input t = c.index(erased(c.shape, c.n() - 1), V, 3);
    for (int64_t ignore : {int64_t(-100), int64_t(0)}) {
      double total = 0;
      int64_t count = 0;
      for_each_index(t.ref.shape, [&](const Index& r) {
        if (int64_t(t.ref[r]) == ignore) return;
        Index i = r;
        i.push_back(0);
        const std::vector<double> l = line(x.ref, i, c.n() - 1);
        const double mx = *std::max_element(l.begin(), l.end());
        double s = 0;
        for (double e : l) s += std::exp(e - mx);
        total += mx + std::log(s) - l[size_t(t.ref[r])];
        ++count;
      });
      expect_matches(ops::cross_entropy(x.t, t.t, ignore), Ref({}, count ? total / double(count) : 0.0), c.tol(),
                     str("cross_entropy ignore_index ", ignore, of));
    }
  }
  // rope on [B, T, H, Dh] and attention on [B, H, T, Dh] (k, v with H / G heads)
  for (const Case& c : all_cases({{2, 3, 2, 4}, {1, 5, 3, 6}})) {
    const Input x = c.input(c.shape);
    const int64_t Dh = c.shape[3], half = Dh / 2;
    for (double base : {10000.0, 500.0})
      for (int64_t off : {0, 3}) {
        Ref want(c.shape);
        for_each_index(c.shape, [&](const Index& i) {
          const int64_t p = i[3] % half;
          const double angle = double(i[1] + off) * std::pow(base, -2.0 * double(p) / double(Dh));
          Index lo = i, hi = i;
          lo[3] = p;
          hi[3] = p + half;
          want[i] = i[3] < half ? x.ref[lo] * std::cos(angle) - x.ref[hi] * std::sin(angle)
                                : x.ref[lo] * std::sin(angle) + x.ref[hi] * std::cos(angle);
        });
        expect_matches(ops::rope(x.t, base, off), want, c.tol(),
                       str("rope base ", base, " offset ", off, " of ", c.name()));
      }
  }
  for (const Case& c : all_cases({{2, 4, 5, 6}})) {
    const int64_t B = 2, H = 4, T = 5, Dh = 6;
    const Input q = c.input(c.shape);
    for (int64_t Hkv : {4, 2, 1}) {
      const Input k = c.in(next_layout(c.layout)).input({B, Hkv, T, Dh}, 1), v = c.input({B, Hkv, T, Dh}, 2);
      for (bool causal : {true, false})
        for (double scale : {0.0, 0.3}) {
          const double sc = scale > 0 ? scale : 1 / std::sqrt(double(Dh));
          Ref want(c.shape);
          for_each_index({B, H, T}, [&](const Index& i) {
            const int64_t hk = i[1] / (H / Hkv), len = causal ? i[2] + 1 : T;
            std::vector<double> s(size_t(len), 0.0);
            for (int64_t j = 0; j < len; ++j)
              for (int64_t e = 0; e < Dh; ++e) s[j] += sc * q.ref[{i[0], i[1], i[2], e}] * k.ref[{i[0], hk, j, e}];
            const double mx = *std::max_element(s.begin(), s.end());
            double z = 0;
            for (double& e : s) z += (e = std::exp(e - mx));
            for (int64_t e = 0; e < Dh; ++e) {
              double acc = 0;
              for (int64_t j = 0; j < len; ++j) acc += s[j] / z * v.ref[{i[0], hk, j, e}];
              want[{i[0], i[1], i[2], e}] = acc;
            }
          });
          expect_matches(ops::scaled_dot_product_attention(q.t, k.t, v.t, causal, scale), want, c.tol(),
                         str("attention Hkv ", Hkv, " causal ", causal, " scale ", scale, " of ", c.name()));
        }
    }
  }
}

}  // namespace
}  // namespace uoe
