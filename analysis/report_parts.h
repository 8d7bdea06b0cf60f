// Pieces shared by the HTML reports of the analysis (report_html.cpp, report_sections.cpp, compare_report.cpp):
// formatting, figures, the page frame, and the sections beyond the routing basics. Internal to analysis/.
#pragma once
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "analysis/routing_analysis.h"
#include "analysis/routing_flags.h"

namespace uoe::analysis::html {

std::string num(double v, const char* format = "%.3f");

// The mean of the finite values of v (an AUC or a correlation may be undefined); NaN when there is none.
double finite_mean(const std::vector<double>& v);

// "0".."n-1" (axis categories) or "expert 0".. (legends)
std::vector<std::string> expert_names(int64_t n, const char* prefix = "");

// The model in one line: FFN kind, layers, experts and the routing switches.
std::string ffn_summary(const nn::ModelConfig& c);

// A <figure id=...> with an SVG chart (or any markup) and its caption.
void figure(std::ostringstream& o, const std::string& id, const std::string& svg, const std::string& caption);

// The page up to and including <body> (styles inline), and its end.
std::string page_start(const std::string& title);
std::string page_end();

// "<h2 id=flags>" with one line per flag at the top of a report, or a line saying there is none.
void flags_section(std::ostringstream& o, const std::vector<RoutingFlag>& flags, const std::string& id = "flags",
                   const std::string& heading = "Flags");

// Layers × experts load as a heatmap (rows: layers).
std::string load_heatmap_svg(const AnalysisResult& r, const std::string& title);

// The figures of layer li after the routing basics, each (id suffix, name) as the table of contents lists them.
std::vector<std::pair<std::string, std::string>> neuron_parts(const LayerAnalysis& l);
void neuron_sections(std::ostringstream& o, const AnalysisResult& r, size_t li);

}  // namespace uoe::analysis::html
