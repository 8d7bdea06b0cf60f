// Two routing analyses side by side (uoe analyze --compare): two checkpoints, or two steps of one run.
#pragma once
#include <string>

#include "analysis/routing_analysis.h"

namespace uoe::analysis {

struct NamedAnalysis {
  std::string name;  // e.g. the checkpoint's path
  AnalysisResult result;
};

// The page: both models, both sets of flags, a per-layer table of every summary metric (A, B, B − A), and charts
// of A against B: compare-entropy, compare-agreement, compare-scan, compare-shared (when both have a shared part),
// compare-gradient-paths (when both are UoE), compare-load-a and compare-load-b.
std::string compare_html(const NamedAnalysis& a, const NamedAnalysis& b);

// Writes `dir`/report.html (compare_html, linking the two full reports), compare.csv (layer, metric, a, b,
// b_minus_a) and each side's full report in `dir`/a and `dir`/b (write_report).
void write_compare_report(const std::string& dir, const NamedAnalysis& a, const NamedAnalysis& b);

}  // namespace uoe::analysis
