// Rank statistics: ranks, correlations, AUC.
#include "analysis/statistics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace uoe::analysis {

std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<size_t> order(v.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * double(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}

double pearson(const std::vector<double>& a, const std::vector<double>& b) {
  UOE_CHECK(a.size() == b.size(), "[pearson] ", a.size(), " values against ", b.size());
  if (a.empty()) return std::nan("");
  const double m = double(a.size());
  const double ma = std::accumulate(a.begin(), a.end(), 0.0) / m, mb = std::accumulate(b.begin(), b.end(), 0.0) / m;
  double sab = 0, saa = 0, sbb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) * (a[i] - ma);
    sbb += (b[i] - mb) * (b[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : std::nan("");
}

double spearman(const std::vector<double>& a, const std::vector<double>& b) { return pearson(ranks(a), ranks(b)); }

double auc(const std::vector<double>& score, const std::vector<uint8_t>& positive) {
  UOE_CHECK(score.size() == positive.size(), "[auc] ", score.size(), " scores for ", positive.size(), " outcomes");
  const std::vector<double> r = ranks(score);
  double rank_sum = 0, pos = 0;
  for (size_t i = 0; i < r.size(); ++i)
    if (positive[i]) {
      rank_sum += r[i];
      pos += 1;
    }
  const double neg = double(r.size()) - pos;
  if (pos == 0 || neg == 0) return std::nan("");
  return (rank_sum - pos * (pos + 1) / 2) / (pos * neg);
}

double selection_overlap(const std::vector<double>& ref, const std::vector<int64_t>& selected) {
  if (selected.empty()) return 0.0;
  std::vector<int64_t> order(ref.size());
  std::iota(order.begin(), order.end(), int64_t(0));
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) { return ref[size_t(x)] > ref[size_t(y)]; });
  int64_t common = 0;
  for (size_t k = 0; k < selected.size() && k < order.size(); ++k)
    common += std::count(selected.begin(), selected.end(), order[k]);
  return double(common) / double(selected.size());
}

}  // namespace uoe::analysis
