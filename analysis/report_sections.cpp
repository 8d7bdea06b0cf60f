// The report's sections beyond the routing basics: routing neurons (UoE), the neuron scan, co-selection, top
// tokens per expert, and the layers × experts load heatmap.
#include <algorithm>
#include <cmath>

#include "analysis/report_parts.h"
#include "analysis/svg_chart.h"

namespace uoe::analysis::html {
namespace {

std::vector<double> positions(int64_t n) {
  std::vector<double> x;
  for (int64_t i = 0; i < n; ++i) x.push_back(double(i));
  return x;
}

// The smallest and largest finite value of a matrix (0 and 1 when there is none).
std::pair<double, double> finite_range(const std::vector<std::vector<double>>& m) {
  double lo = INFINITY, hi = -INFINITY;
  for (const auto& row : m)
    for (double v : row)
      if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  return std::isfinite(lo) ? std::pair{lo, hi > lo ? hi : lo + 1e-12} : std::pair{0.0, 1.0};
}

void routing_neurons(std::ostringstream& o, const AnalysisResult& r, size_t li) {
  const LayerAnalysis& l = r.layers[li];
  const RoutingNeuronStats& s = l.neurons.routing;
  const int64_t n = l.n_experts, per = int64_t(s.corr.size()) / n;
  const std::string id = "layer" + std::to_string(li), L = "Layer " + std::to_string(li) + ": ";
  std::vector<std::vector<double>> corr(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) corr[size_t(e)].assign(s.corr.begin() + e * per, s.corr.begin() + (e + 1) * per);
  const double hi = std::max(finite_range(corr).second, 1e-12);
  figure(o, id + "-neurons",
         heatmap_svg(L + "routing neurons: correlation of |H| with their expert being selected", "routing neuron",
                     expert_names(n, "expert "), positions(per), corr, 0.0, hi),
         "Each cell: Pearson correlation over the sampled tokens between a routing neuron's |activation| and "
         "\"its expert is selected\" (white: 0 or negative, grey: undefined). Mean activation rate (gate > 0) " +
             num(finite_mean(s.rate)) +
             ", mean |H| " + num(finite_mean(s.mean_abs), "%.3g") +
             (l.neurons.has_shared ? ", virtual shared expert's share of the output norm " + num(l.neurons.shared_share)
                                   : std::string()) +
             ". Every neuron's numbers are in neurons.csv.");
  if (!l.has_gradient_paths) return;
  const PathNorms& g = l.neuron_gradient;
  std::vector<Series> points(static_cast<size_t>(n));
  for (int64_t e = 0; e < n; ++e) {
    points[size_t(e)].label = "expert " + std::to_string(e);
    for (int64_t j = 0; j < per; ++j) {
      points[size_t(e)].x.push_back(g.vse[size_t(e * per + j)]);
      points[size_t(e)].y.push_back(g.weights[size_t(e * per + j)]);
    }
  }
  figure(o, id + "-neuron-gradients",
         scatter_svg(L + "gradient per routing neuron: via VSE vs via routing weights", "‖gradient via VSE‖",
                     "‖gradient via routing weights‖", points),
         "One point per routing neuron: the Frobenius norm of its columns of W_gate and W_up, by path. Mean per "
         "neuron: via VSE " + num(finite_mean(g.vse), "%.3g") + ", via routing weights " + num(finite_mean(g.weights), "%.3g") +
             ", via the layer's own auxiliary loss " + num(finite_mean(g.aux), "%.3g") +
             (r.config.ffn.aux_loss > 0 || r.config.ffn.routing == nn::Routing::TopP
                  ? std::string()
                  : std::string(" (ffn.aux_loss is 0 and routing top-k: no auxiliary loss)")) +
             ".");
}

void neuron_scan(std::ostringstream& o, const AnalysisResult& r, size_t li) {
  const LayerAnalysis& l = r.layers[li];
  const NeuronScan& s = l.neurons.scan;
  const std::string id = "layer" + std::to_string(li), L = "Layer " + std::to_string(li) + ": ";
  const std::string rs = std::to_string(s.r);
  const bool uoe = r.config.ffn.kind == nn::FfnKind::UoE;
  figure(o, id + "-scan",
         bar_chart_svg(L + "neuron scan: does the norm of r neurons predict the router's choice?", "expert",
                       "AUC (selected vs not)", expert_names(l.n_experts),
                       {{"best " + rs + " neurons", {}, s.auc_best},
                        {"first " + rs + " neurons" + (uoe ? " (routing)" : ""), {}, s.auc_first},
                        {"all neurons", {}, s.auc_all},
                        {"routing score", {}, s.auc_score}},
                       false, 0.5),
         "AUC of each norm for \"the router selected this expert\" on " + std::to_string(s.test_tokens) +
             " held-out tokens (1 = separates perfectly, dashed 0.5 = chance); the best " + rs +
             " neurons were picked on " + std::to_string(s.pick_tokens) +
             " other tokens by their correlation with the selection. Routing every token by the best-" + rs +
             " norms picks the router's experts " + num(100 * s.overlap_best, "%.1f") + "% of the time (first " + rs +
             ": " + num(100 * s.overlap_first, "%.1f") + "%, random " + num(100 * s.random_overlap, "%.1f") +
             "%). No bars: the expert was never (or always) selected among the held-out tokens.");
}

void coselection(std::ostringstream& o, size_t li, const LayerAnalysis& l) {
  const int64_t n = l.n_experts;
  std::vector<std::vector<double>> given(size_t(n), std::vector<double>(size_t(n), NAN));
  for (int64_t a = 0; a < n; ++a)
    for (int64_t b = 0; b < n; ++b)
      if (a != b && l.coselection[size_t(a * n + a)] > 0)
        given[size_t(a)][size_t(b)] = l.coselection[size_t(a * n + b)] / l.coselection[size_t(a * n + a)];
  const auto range = finite_range(given);
  const double independent = l.experts_per_token > 1 ? (l.experts_per_token - 1) / double(n - 1) : 0.0;
  figure(o, "layer" + std::to_string(li) + "-coselection",
         category_heatmap_svg("Layer " + std::to_string(li) + ": co-selection P(column selected | row selected)",
                     "expert (column)", expert_names(n, "expert "), expert_names(n), given, 0.0, range.second),
         "Row a, column b: the fraction of the tokens that selected expert a which also selected b (diagonal and "
         "experts never selected: grey). Independent uniform routing gives about " + num(independent) +
             "; coselection.csv has the joint fractions.");
}

// A token's text with a space, line break or tab shown as a visible sign.
std::string visible(const std::string& text) {
  std::string out;
  for (char ch : text) out += ch == ' ' ? "␣" : ch == '\n' ? "↵" : ch == '\t' ? "⇥" : std::string(1, ch);
  return out;
}

void top_tokens(std::ostringstream& o, size_t li, const LayerAnalysis& l) {
  o << "<figure id=\"layer" << li << "-top-tokens\">\n<table>\n<tr><th>expert</th><th>load</th>"
    << "<th>top tokens (share of the token's occurrences this expert took, count)</th></tr>\n";
  for (size_t e = 0; e < l.top_tokens.size(); ++e) {
    o << "<tr><td>" << e << "</td><td>" << num(l.load[e]) << "</td><td>";
    for (const TopToken& t : l.top_tokens[e])
      o << "<span class=\"piece\">" << escape_xml(visible(t.text)) << "</span> "
        << num(100 * t.share, t.share < 0.1 ? "%.1f" : "%.0f") << "% (" << t.count << ") ";
    o << "</td></tr>\n";
  }
  o << "</table>\n<figcaption>Layer " << li << ": each expert's tokens ranked by count × share (frequent in the expert "
    << "and mostly sent to it); every slot counts.</figcaption>\n</figure>\n";
}

}  // namespace

std::string load_heatmap_svg(const AnalysisResult& r, const std::string& title) {
  std::vector<std::string> rows;
  std::vector<std::vector<double>> load;
  int64_t n = 0;
  for (size_t li = 0; li < r.layers.size(); ++li) {
    rows.push_back("layer " + std::to_string(li));
    load.push_back(r.layers[li].load);
    n = r.layers[li].n_experts;
  }
  return category_heatmap_svg(title, "expert", rows, expert_names(n), load, 0.0, finite_range(load).second);
}

std::vector<std::pair<std::string, std::string>> neuron_parts(const LayerAnalysis& l) {
  std::vector<std::pair<std::string, std::string>> parts;
  if (l.has_neurons && l.neurons.has_routing_neurons) {
    parts.push_back({"-neurons", "routing neurons"});
    if (l.has_gradient_paths) parts.push_back({"-neuron-gradients", "neuron gradients"});
  }
  if (l.has_neurons) parts.push_back({"-scan", "neuron scan"});
  if (!l.coselection.empty()) parts.push_back({"-coselection", "co-selection"});
  if (!l.top_tokens.empty()) parts.push_back({"-top-tokens", "top tokens"});
  return parts;
}

void neuron_sections(std::ostringstream& o, const AnalysisResult& r, size_t li) {
  const LayerAnalysis& l = r.layers[li];
  if (l.has_neurons && l.neurons.has_routing_neurons) routing_neurons(o, r, li);
  if (l.has_neurons) neuron_scan(o, r, li);
  if (!l.coselection.empty()) coselection(o, li, l);
  if (!l.top_tokens.empty()) top_tokens(o, li, l);
}

}  // namespace uoe::analysis::html
