// The analysis report: report.html (one self-contained page, inline SVG, no scripts), stats.json and CSV files.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "analysis/routing_analysis.h"
#include "core/json.h"

namespace uoe::analysis {

// Every number of the analysis, by layer (docs/METRICS.md).
json::Value to_json(const AnalysisResult& r);

// The HTML page. Each chart is a <figure id="...">: summary-entropy, summary-agreement, then per layer L
// layerL-load, layerL-scores, layerL-margin, layerL-agreement, layerL-gradient-paths (UoE), layerL-tokens.
std::string report_html(const AnalysisResult& r, const std::string& title);

// The CSV tables of the analysis, (name without .csv, text), in a fixed order: layers, flags, load, scores,
// margins, agreement, gradient_paths, neurons (UoE), neuron_scan, coselection, top_tokens, token_experts.
std::vector<std::pair<std::string, std::string>> csv_tables(const AnalysisResult& r);

// Writes report.html, stats.json and every CSV table into `dir` (created when missing), each file atomically.
void write_report(const std::string& dir, const AnalysisResult& r, const std::string& title);

}  // namespace uoe::analysis
