// ReferenceOps, layers: rms_norm, layer_norm, cross_entropy, rope and attention against reference loops.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/reference/reference_harness.h"

namespace uoe::reference {
namespace {

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
}  // namespace uoe::reference
