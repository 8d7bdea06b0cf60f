// The shared machinery of the ReferenceOps tests: building inputs, comparing, and the shared reference loops.
#include "ops/reference/reference_harness.h"

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe::reference {

using testing::random_double;

// ---- multi-indices and reference tensors ----

int64_t ravel(const Index& i, const Shape& s) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + i[d];
  return f;
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
Shape ones_at(Shape s, int64_t mask) {
  for (size_t d = 0; d < s.size(); ++d)
    if ((mask >> d) & 1) s[d] = 1;
  return s;
}

double Ref::bcast(const Index& o) const {
  Index i(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) i[d] = shape[d] == 1 ? 0 : o[o.size() - shape.size() + d];
  return (*this)[i];
}

Ref reshaped(Ref r, Shape s) {
  r.shape = std::move(s);
  return r;
}

std::vector<double> line(const Ref& x, Index i, int64_t d) {
  std::vector<double> v;
  for (i[d] = 0; i[d] < x.shape[d]; ++i[d]) v.push_back(x[i]);
  return v;
}

// ---- inputs: random views with known values ----

const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contiguous: return "contiguous";
    case Layout::Permuted: return "permuted";
    case Layout::Sliced: return "sliced";
    case Layout::PermutedSliced: return "permuted+sliced";
  }
  return "?";
}
Layout next_layout(Layout l, int k) { return kLayouts[(int(l) + k) % 4]; }

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

Input Case::input(const Shape& s, uint64_t salt, bool positive, bool grad) const {
  return make_input(s, layout, [&](const Shape& b) {
    Tensor t = random_double(b, seed * 64 + salt, positive).to(dtype).detach();
    return grad ? t.requires_grad_() : t;
  });
}
Input Case::zeros_input(const Shape& s) const {
  return make_input(s, layout, [&](const Shape& b) { return zeros(b, TensorOptions{}.with_dtype(dtype)); });
}
Input Case::bool_input(const Shape& s, uint64_t salt) const {
  return make_input(s, layout, [&](const Shape& b) {
    const Tensor r = random_double(b, seed * 64 + salt);
    return ops::gt(r, ops::scalar_like(0.0, r));
  });
}
Input Case::index(const Shape& s, int64_t high, uint64_t salt) const {
  return make_input(s, layout, [&](const Shape& b) {
    Generator g(seed * 64 + salt);
    return randint(0, high, b, TensorOptions{}.with_dtype(DType::Int64), &g);
  });
}

std::vector<Case> all_cases(const std::vector<Shape>& shapes) {
  std::vector<Case> cases;
  uint64_t seed = 1;
  for (const Shape& s : shapes)
    for (Layout l : kLayouts)
      for (DType t : {DType::Float64, DType::Float32}) cases.push_back({s, l, t, seed++});
  return cases;
}

std::vector<int64_t> all_dims(int64_t n) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < n; ++d) dims.push_back(d);
  for (int64_t d = 0; d < n; ++d) dims.push_back(d - n);
  return dims;
}

// ---- comparison ----

namespace {
int64_t g_checks = 0;  // tensors compared by the current test
}  // namespace

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

void ReferenceOps::SetUp() { g_checks = 0; }
void ReferenceOps::TearDown() {
  RecordProperty("comparisons", int(g_checks));
  EXPECT_GT(g_checks, 0) << "the test compared no tensor against its reference";
}

// ---- reference loops used by more than one family ----

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

}  // namespace uoe::reference
