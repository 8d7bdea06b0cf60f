// Routing analyses side by side: one table of per-layer metrics and charts of the runs against each other.
#include "analysis/compare_report.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>

#include "analysis/report.h"
#include "analysis/report_parts.h"
#include "analysis/svg_chart.h"
#include "core/atomic_file.h"
#include "core/error.h"

namespace uoe::analysis {
namespace {

using html::figure;
using html::finite_mean;
using html::num;

// A per-layer number of an analysis; NaN where the layer has none.
struct Metric {
  std::string name;
  std::function<double(const LayerAnalysis&)> of;
};

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> all = {
      {"load entropy", [](const LayerAnalysis& l) { return l.load_entropy; }},
      {"confidence entropy", [](const LayerAnalysis& l) { return l.confidence_entropy; }},
      {"experts per token", [](const LayerAnalysis& l) { return l.experts_per_token; }},
      {"margin mean", [](const LayerAnalysis& l) { return l.margin_mean; }},
      {"Spearman (score, full activation)", [](const LayerAnalysis& l) { return l.full.spearman; }},
      {"top-K overlap (full activation)", [](const LayerAnalysis& l) { return l.full.overlap; }},
      {"random overlap", [](const LayerAnalysis& l) { return l.full.random_overlap; }},
      {"shared part's share of the output norm",
       [](const LayerAnalysis& l) { return l.has_neurons && l.neurons.has_shared ? l.neurons.shared_share : NAN; }},
      {"neuron scan: overlap by best r",
       [](const LayerAnalysis& l) { return l.has_neurons ? l.neurons.scan.overlap_best : NAN; }},
      {"neuron scan: mean AUC of best r",
       [](const LayerAnalysis& l) { return l.has_neurons ? finite_mean(l.neurons.scan.auc_best) : NAN; }},
      {"mean ‖gradient via VSE‖",
       [](const LayerAnalysis& l) { return l.has_gradient_paths ? finite_mean(l.gradient.vse) : NAN; }},
      {"mean ‖gradient via routing weights‖",
       [](const LayerAnalysis& l) { return l.has_gradient_paths ? finite_mean(l.gradient.weights) : NAN; }},
      {"mean ‖gradient via aux loss‖",
       [](const LayerAnalysis& l) { return l.has_gradient_paths ? finite_mean(l.gradient.aux) : NAN; }},
  };
  return all;
}

double value(const AnalysisResult& r, size_t li, const Metric& m) {
  return li < r.layers.size() ? m.of(r.layers[li]) : NAN;
}

std::string cell(double v) { return std::isfinite(v) ? num(v, "%.4g") : std::string("n/a"); }

std::string folder(const NamedAnalysis& run) {
  std::string f = run.label;
  for (char& c : f) c = char(std::tolower(static_cast<unsigned char>(c)));
  return f;
}

size_t layer_count(const std::vector<NamedAnalysis>& runs) {
  size_t n = 0;
  for (const NamedAnalysis& r : runs) n = std::max(n, r.result.layers.size());
  return n;
}

// Every run's value of metric m in layer li, then each other run's minus the first's.
std::vector<double> row(const std::vector<NamedAnalysis>& runs, size_t li, const Metric& m) {
  std::vector<double> v;
  for (const NamedAnalysis& r : runs) v.push_back(value(r.result, li, m));
  for (size_t i = 1; i < runs.size(); ++i) v.push_back(v[i] - v[0]);
  return v;
}

bool any_finite(const std::vector<double>& v) {
  for (double x : v)
    if (std::isfinite(x)) return true;
  return false;
}

void comparison_table(std::ostringstream& o, const std::vector<NamedAnalysis>& runs) {
  o << "<table>\n<tr><th>metric</th><th>layer</th>";
  for (const NamedAnalysis& r : runs) o << "<th>" << escape_xml(r.label) << "</th>";
  for (size_t i = 1; i < runs.size(); ++i) o << "<th>" << escape_xml(runs[i].label + " − " + runs[0].label) << "</th>";
  o << "</tr>\n";
  for (const Metric& m : metrics())
    for (size_t li = 0; li < layer_count(runs); ++li) {
      const std::vector<double> v = row(runs, li, m);
      if (!any_finite(v)) continue;
      o << "<tr><td>" << escape_xml(m.name) << "</td><td>" << li << "</td>";
      for (double x : v) o << "<td>" << cell(x) << "</td>";
      o << "</tr>\n";
    }
  o << "</table>\n";
}

// Metric `name` per layer for every run, one bar series each labelled `prefix` + the run's label (the chart's title
// names the metric).
std::vector<Series> per_layer(const std::vector<NamedAnalysis>& runs, const std::string& name,
                              const std::string& prefix = "") {
  const Metric* m = nullptr;
  for (const Metric& x : metrics())
    if (x.name == name) m = &x;
  std::vector<Series> s;
  for (const NamedAnalysis& r : runs) {
    s.push_back({prefix + r.label, {}, {}});
    for (size_t li = 0; li < layer_count(runs); ++li) s.back().y.push_back(value(r.result, li, *m));
  }
  return s;
}

// Every run has the metric in some layer (runs of different depths leave the others' deeper layers empty).
bool every_run_has(const std::vector<Series>& series) {
  for (const Series& s : series)
    if (!any_finite(s.y)) return false;
  return !series.empty();
}

void charts(std::ostringstream& o, const std::vector<NamedAnalysis>& runs) {
  std::vector<std::string> layers;
  for (size_t li = 0; li < layer_count(runs); ++li) layers.push_back("layer " + std::to_string(li));
  figure(o, "compare-entropy",
         bar_chart_svg("Load entropy per layer", "layer", "normalised entropy", layers, per_layer(runs, "load entropy")),
         "1 = every expert gets the same share of the routed slots.");
  std::vector<Series> agree = per_layer(runs, "top-K overlap (full activation)");
  agree.push_back(per_layer(runs, "random overlap")[0]);
  agree.back().label = "random (" + runs[0].label + ")";
  figure(o, "compare-agreement",
         bar_chart_svg("Top-K overlap of the routing with the full activation", "layer", "overlap", layers, agree),
         "Fraction of the selected experts that are also among the top-K experts by the norm of their full activation.");
  figure(o, "compare-scan",
         bar_chart_svg("Neuron scan: top-K overlap by the best r neurons", "layer", "overlap", layers,
                       per_layer(runs, "neuron scan: overlap by best r")),
         "Would each expert's best r neurons route like the router? (docs/METRICS.md, neuron scan)");
  const std::vector<Series> shared = per_layer(runs, "shared part's share of the output norm");
  if (every_run_has(shared))
    figure(o, "compare-shared",
           bar_chart_svg("Shared part's share of the layer output norm", "layer", "share", layers, shared),
           "UoE: the virtual shared expert; MoE: the shared expert; mean over tokens of "
           "‖shared‖ / (‖shared‖ + ‖routed‖).");
  std::vector<Series> paths;
  for (const auto& [name, prefix] : {std::pair{"mean ‖gradient via VSE‖", "VSE: "},
                                     {"mean ‖gradient via routing weights‖", "weights: "},
                                     {"mean ‖gradient via aux loss‖", "aux: "}})
    for (const Series& s : per_layer(runs, name, prefix)) paths.push_back(s);
  if (every_run_has(paths))
    figure(o, "compare-gradient-paths",
           bar_chart_svg("Gradient into the routing neurons by path, mean over experts", "layer", "‖gradient‖", layers,
                         paths),
           "Through the virtual shared expert, through the routing weights, and the layer's own auxiliary loss.");
  for (const NamedAnalysis& r : runs)
    figure(o, "compare-load-" + folder(r), html::load_heatmap_svg(r.result, r.label + ": expert load, layers × experts"),
           r.name);
}

}  // namespace

std::string compare_html(const std::vector<NamedAnalysis>& runs) {
  UOE_CHECK(!runs.empty(), "[compare_html] no analysis to show");
  std::ostringstream o;
  const std::string title = runs.size() == 2 ? "Routing analysis: " + runs[0].name + " vs " + runs[1].name
                                             : "Routing analysis of " + std::to_string(runs.size()) + " runs";
  o << html::page_start(title) << "<h1>" << escape_xml(title) << "</h1>\n<ul>\n";
  for (const NamedAnalysis& r : runs)
    o << "<li><b>" << escape_xml(r.label) << "</b>: " << escape_xml(r.name) << ": "
      << escape_xml(html::ffn_summary(r.result.config)) << "; " << r.result.tokens << " tokens (<a href=\"" << folder(r)
      << "/report.html\">full report</a>)</li>\n";
  o << "</ul>\n";
  for (const NamedAnalysis& r : runs)
    html::flags_section(o, routing_flags(r.result), "flags-" + folder(r), "Flags of " + r.label);
  o << "<h2 id=\"metrics\">Per-layer metrics</h2>\n";
  comparison_table(o, runs);
  o << "<h2 id=\"charts\">Charts</h2>\n";
  charts(o, runs);
  o << html::page_end();
  return o.str();
}

void write_compare_report(const std::string& dir, const std::vector<NamedAnalysis>& runs) {
  std::filesystem::create_directories(dir);
  std::ostringstream csv;
  csv << "layer,metric";
  for (const NamedAnalysis& r : runs) {
    write_report(dir + "/" + folder(r), r.result, "Routing analysis of " + r.name);
    csv << "," << folder(r);
  }
  for (size_t i = 1; i < runs.size(); ++i) csv << "," << folder(runs[i]) << "_minus_" << folder(runs[0]);
  csv << "\n";
  for (size_t li = 0; li < layer_count(runs); ++li)
    for (const Metric& m : metrics()) {
      csv << li << ",\"" << m.name << "\"";
      for (double v : row(runs, li, m)) csv << "," << (std::isfinite(v) ? num(v, "%.9g") : std::string());
      csv << "\n";
    }
  write_file_atomic(dir + "/compare.csv", csv.str());
  write_file_atomic(dir + "/report.html", compare_html(runs));
}

}  // namespace uoe::analysis
