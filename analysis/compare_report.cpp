// Two routing analyses side by side: one table of per-layer metrics and charts of A against B.
#include "analysis/compare_report.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <sstream>

#include "analysis/report.h"
#include "analysis/report_parts.h"
#include "analysis/svg_chart.h"
#include "core/atomic_file.h"

namespace uoe::analysis {
namespace {

using html::figure;
using html::num;

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? NAN : s / double(v.size());
}

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
      {"neuron scan: overlap by best r", [](const LayerAnalysis& l) { return l.has_neurons ? l.neurons.scan.overlap_best : NAN; }},
      {"neuron scan: mean AUC of best r",
       [](const LayerAnalysis& l) { return l.has_neurons ? mean(l.neurons.scan.auc_best) : NAN; }},
      {"mean ‖gradient via VSE‖", [](const LayerAnalysis& l) { return l.has_gradient_paths ? mean(l.gradient.vse) : NAN; }},
      {"mean ‖gradient via routing weights‖",
       [](const LayerAnalysis& l) { return l.has_gradient_paths ? mean(l.gradient.weights) : NAN; }},
      {"mean ‖gradient via aux loss‖", [](const LayerAnalysis& l) { return l.has_gradient_paths ? mean(l.gradient.aux) : NAN; }},
  };
  return all;
}

double value(const AnalysisResult& r, size_t li, const Metric& m) { return li < r.layers.size() ? m.of(r.layers[li]) : NAN; }

std::string cell(double v) { return std::isfinite(v) ? num(v, "%.4g") : std::string("n/a"); }

size_t layer_count(const NamedAnalysis& a, const NamedAnalysis& b) {
  return std::max(a.result.layers.size(), b.result.layers.size());
}

void comparison_table(std::ostringstream& o, const NamedAnalysis& a, const NamedAnalysis& b) {
  o << "<table>\n<tr><th>metric</th><th>layer</th><th>A</th><th>B</th><th>B − A</th></tr>\n";
  for (const Metric& m : metrics())
    for (size_t li = 0; li < layer_count(a, b); ++li) {
      const double x = value(a.result, li, m), y = value(b.result, li, m);
      if (!std::isfinite(x) && !std::isfinite(y)) continue;
      o << "<tr><td>" << escape_xml(m.name) << "</td><td>" << li << "</td><td>" << cell(x) << "</td><td>" << cell(y)
        << "</td><td>" << cell(y - x) << "</td></tr>\n";
    }
  o << "</table>\n";
}

// Metric `name` per layer for both sides, as two bar series labelled `prefix`A and `prefix`B (the chart's title
// names the metric).
std::vector<Series> per_layer(const NamedAnalysis& a, const NamedAnalysis& b, const std::string& name,
                              const std::string& prefix = "") {
  const Metric* m = nullptr;
  for (const Metric& x : metrics())
    if (x.name == name) m = &x;
  std::vector<Series> s = {{prefix + "A", {}, {}}, {prefix + "B", {}, {}}};
  for (size_t li = 0; li < layer_count(a, b); ++li) {
    s[0].y.push_back(value(a.result, li, *m));
    s[1].y.push_back(value(b.result, li, *m));
  }
  return s;
}

bool all_finite(const Series& s) {
  for (double v : s.y)
    if (!std::isfinite(v)) return false;
  return !s.y.empty();
}

void charts(std::ostringstream& o, const NamedAnalysis& a, const NamedAnalysis& b) {
  std::vector<std::string> layers;
  for (size_t li = 0; li < layer_count(a, b); ++li) layers.push_back("layer " + std::to_string(li));
  figure(o, "compare-entropy",
         bar_chart_svg("Load entropy per layer, A vs B", "layer", "normalised entropy", layers,
                       per_layer(a, b, "load entropy")),
         "1 = every expert gets the same share of the routed slots.");
  std::vector<Series> agree = per_layer(a, b, "top-K overlap (full activation)");
  agree.push_back(per_layer(a, b, "random overlap")[0]);
  agree.back().label = "random (A)";
  figure(o, "compare-agreement",
         bar_chart_svg("Top-K overlap of the routing with the full activation, A vs B", "layer", "overlap", layers, agree),
         "Fraction of the selected experts that are also among the top-K experts by the norm of their full activation.");
  figure(o, "compare-scan",
         bar_chart_svg("Neuron scan: top-K overlap by the best r neurons, A vs B", "layer", "overlap", layers,
                       per_layer(a, b, "neuron scan: overlap by best r")),
         "Would each expert's best r neurons route like the router? (docs/METRICS.md, neuron scan)");
  const std::vector<Series> shared = per_layer(a, b, "shared part's share of the output norm");
  if (all_finite(shared[0]) && all_finite(shared[1]))
    figure(o, "compare-shared",
           bar_chart_svg("Shared part's share of the layer output norm, A vs B", "layer", "share", layers, shared),
           "UoE: the virtual shared expert; MoE: the shared expert; mean over tokens of ‖shared‖ / (‖shared‖ + ‖routed‖).");
  std::vector<Series> paths;
  for (const auto& [name, prefix] : {std::pair{"mean ‖gradient via VSE‖", "VSE: "},
                                     {"mean ‖gradient via routing weights‖", "weights: "},
                                     {"mean ‖gradient via aux loss‖", "aux: "}})
    for (const Series& s : per_layer(a, b, name, prefix)) paths.push_back(s);
  if (all_finite(paths[0]) && all_finite(paths[1]))
    figure(o, "compare-gradient-paths",
           bar_chart_svg("Gradient into the routing neurons by path, mean over experts, A vs B", "layer", "‖gradient‖",
                         layers, paths),
           "Through the virtual shared expert, through the routing weights, and the layer's own auxiliary loss.");
  figure(o, "compare-load-a", html::load_heatmap_svg(a.result, "A: expert load, layers × experts"), a.name);
  figure(o, "compare-load-b", html::load_heatmap_svg(b.result, "B: expert load, layers × experts"), b.name);
}

}  // namespace

std::string compare_html(const NamedAnalysis& a, const NamedAnalysis& b) {
  std::ostringstream o;
  const std::string title = "Routing analysis: " + a.name + " vs " + b.name;
  o << html::page_start(title) << "<h1>" << escape_xml(title) << "</h1>\n<ul>\n";
  for (const auto* side : {&a, &b})
    o << "<li><b>" << (side == &a ? "A" : "B") << "</b>: " << escape_xml(side->name) << ": "
      << escape_xml(html::ffn_summary(side->result.config)) << "; " << side->result.tokens << " tokens (<a href=\""
      << (side == &a ? "a" : "b") << "/report.html\">full report</a>)</li>\n";
  o << "</ul>\n";
  html::flags_section(o, routing_flags(a.result), "flags-a", "Flags of A");
  html::flags_section(o, routing_flags(b.result), "flags-b", "Flags of B");
  o << "<h2 id=\"metrics\">Per-layer metrics</h2>\n";
  comparison_table(o, a, b);
  o << "<h2 id=\"charts\">Charts</h2>\n";
  charts(o, a, b);
  o << html::page_end();
  return o.str();
}

void write_compare_report(const std::string& dir, const NamedAnalysis& a, const NamedAnalysis& b) {
  std::filesystem::create_directories(dir);
  write_report(dir + "/a", a.result, "Routing analysis of " + a.name);
  write_report(dir + "/b", b.result, "Routing analysis of " + b.name);
  std::ostringstream csv;
  csv << "layer,metric,a,b,b_minus_a\n";
  for (size_t li = 0; li < layer_count(a, b); ++li)
    for (const Metric& m : metrics()) {
      const double x = value(a.result, li, m), y = value(b.result, li, m);
      auto field = [](double v) { return std::isfinite(v) ? num(v, "%.9g") : std::string(); };
      csv << li << ",\"" << m.name << "\"," << field(x) << "," << field(y) << "," << field(y - x) << "\n";
    }
  write_file_atomic(dir + "/compare.csv", csv.str());
  write_file_atomic(dir + "/report.html", compare_html(a, b));
}

}  // namespace uoe::analysis
