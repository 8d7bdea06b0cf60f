// Warnings a routing analysis raises (docs/METRICS.md "Flags"): dead experts and layers whose routing score
// agrees with the experts' full activation below chance. The report shows them at its top and in flags.csv.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "analysis/routing_analysis.h"

namespace uoe::analysis {

struct RoutingFlag {
  std::string kind;        // "dead_expert" or "below_chance_agreement"
  int64_t layer = 0;
  int64_t expert = -1;     // -1: the flag is about the whole layer
  double value = 0;        // the load, or the top-K overlap
  double threshold = 0;    // what it fell below
  std::string message;     // one line saying what was found
};

// An expert is dead when its load is below kDeadLoadFraction / n (a tenth of the uniform share; load 0: never
// selected).
constexpr double kDeadLoadFraction = 0.1;
// A layer agrees below chance when its top-K overlap with the full activation is below the random overlap K / n
// by more than kChanceStandardErrors standard errors of the overlap.
constexpr double kChanceStandardErrors = 2.0;

// Every flag of `r`, by layer, then expert.
std::vector<RoutingFlag> routing_flags(const AnalysisResult& r);

}  // namespace uoe::analysis
