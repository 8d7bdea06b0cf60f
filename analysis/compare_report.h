// Routing analyses side by side: two checkpoints (uoe analyze --compare, e.g. two steps of one run), or every run
// of a `uoe compare` folder (uoe analyze --runs).
#pragma once
#include <string>
#include <vector>

#include "analysis/routing_analysis.h"

namespace uoe::analysis {

struct NamedAnalysis {
  std::string name;   // where it came from, e.g. the checkpoint's path
  std::string label;  // short, unique: "A", "B", or a run folder's name; lowercased, its report's subfolder
  AnalysisResult result;
};

// The page: every model and its flags (section flags-<folder>), a per-layer table of every summary metric (each
// run, and each run minus the first), and charts of the runs against each other: compare-entropy,
// compare-agreement, compare-scan, compare-shared (when every run has a shared part), compare-gradient-paths (when
// every run is UoE), and compare-load-<folder> for each.
std::string compare_html(const std::vector<NamedAnalysis>& runs);

// Writes `dir`/report.html (compare_html, linking the full reports), compare.csv (layer, metric, the value of each
// run by folder, then <folder>_minus_<first folder> for the others) and each run's full report in `dir`/<folder>
// (write_report).
void write_compare_report(const std::string& dir, const std::vector<NamedAnalysis>& runs);

}  // namespace uoe::analysis
