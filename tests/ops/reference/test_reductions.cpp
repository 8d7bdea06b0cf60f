// ReferenceOps, reductions: sum and mean, max/min/argmax, softmax and log_softmax, topk against reference loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "ops/ops.h"
#include "ops/reference/reference_harness.h"

namespace uoe::reference {
namespace {

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

}  // namespace
}  // namespace uoe::reference
