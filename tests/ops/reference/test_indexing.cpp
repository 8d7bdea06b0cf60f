// ReferenceOps, indexing: gather and scatter_add, index_select, index_add and embedding against reference loops.
#include <gtest/gtest.h>

#include <string>

#include "ops/ops.h"
#include "ops/reference/reference_harness.h"

namespace uoe::reference {
namespace {

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

}  // namespace
}  // namespace uoe::reference
