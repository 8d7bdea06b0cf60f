// Dead experts and below-chance agreement, found in an analysis result.
#include "analysis/routing_flags.h"

#include <algorithm>
#include <cstdio>

namespace uoe::analysis {
namespace {

std::string format(const char* f, double a, double b, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

}  // namespace

std::vector<RoutingFlag> routing_flags(const AnalysisResult& r) {
  std::vector<RoutingFlag> flags;
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    const int64_t layer = int64_t(li);
    const double dead = kDeadLoadFraction / double(std::max<int64_t>(1, l.n_experts));
    for (size_t e = 0; e < l.load.size(); ++e)
      if (l.load[e] < dead)
        flags.push_back({"dead_expert", layer, int64_t(e), l.load[e], dead,
                         "layer " + std::to_string(li) + ", expert " + std::to_string(e) + ": " +
                             (l.load[e] == 0 ? std::string("never selected")
                                             : format("load %.4f, under a tenth of the uniform share %.4f", l.load[e],
                                                      1.0 / double(l.n_experts)))});
    const Agreement& a = l.full;
    const double chance = a.random_overlap - kChanceStandardErrors * a.overlap_se;
    if (a.tokens > 0 && a.overlap < chance)
      flags.push_back({"below_chance_agreement", layer, -1, a.overlap, chance,
                       "layer " + std::to_string(li) + ": the routing score agrees with the full activation below chance" +
                           format(" (top-K overlap %.3f, random %.3f, standard error %.3f)", a.overlap,
                                  a.random_overlap, a.overlap_se)});
  }
  return flags;
}

}  // namespace uoe::analysis
