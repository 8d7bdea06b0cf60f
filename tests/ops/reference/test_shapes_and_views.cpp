// ReferenceOps, shapes and views: cat, stack, split, narrow, slice, select, views and copies against reference loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "ops/reference/reference_harness.h"

namespace uoe::reference {
namespace {

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

// ==== tests ====

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

}  // namespace
}  // namespace uoe::reference
