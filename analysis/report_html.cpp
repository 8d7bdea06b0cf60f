// The analysis report as one self-contained XHTML page: summary table, inline SVG charts per layer,
// token text coloured by top expert. No scripts, no external resources.
#include <sstream>

#include "analysis/report.h"
#include "analysis/report_parts.h"
#include "analysis/routing_flags.h"
#include "analysis/svg_chart.h"
#include "core/utf8.h"

namespace uoe::analysis {
namespace {

using html::expert_names;
using html::figure;
using html::num;

// Bytes that are not valid UTF-8 become U+FFFD, so a token piece cut inside a character stays readable.
std::string valid_utf8(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = utf8_length(s, i);
    if (len > 0 && (c >= 0x20 || c == '\n' || c == '\t')) {
      out.append(s, i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += 1;
    }
  }
  return out;
}

void summary_table(std::ostringstream& o, const AnalysisResult& r) {
  const bool uoe = r.config.ffn.kind == nn::FfnKind::UoE;
  o << "<table>\n<tr><th>layer</th><th>load entropy</th><th>confidence entropy</th><th>experts / token</th>"
       "<th>margin mean</th><th>margin median</th><th>Spearman (score, full act.)</th>"
       "<th>top-K overlap (full act.)</th><th>random overlap</th>";
  if (uoe) o << "<th>Spearman (score, neurons r..D)</th><th>overlap (r..D)</th><th>mean ‖∇ VSE‖ / ‖∇ score‖</th>";
  const bool shared = !r.layers.empty() && r.layers[0].has_neurons && r.layers[0].neurons.has_shared;
  if (shared) o << "<th>" << (uoe ? "VSE" : "shared expert") << " share of the output norm</th>";
  o << "<th>neuron scan: overlap by best r</th>";
  o << "</tr>\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    o << "<tr><td>" << li << "</td><td>" << num(l.load_entropy) << "</td><td>" << num(l.confidence_entropy) << "</td><td>"
      << num(l.experts_per_token, "%.2f") << "</td><td>" << num(l.margin_mean, "%.4g") << "</td><td>"
      << num(l.margin_median, "%.4g") << "</td><td>" << num(l.full.spearman) << "</td><td>" << num(l.full.overlap)
      << "</td><td>" << num(l.full.random_overlap) << "</td>";
    if (uoe) {
      // the mean over the experts whose score got a gradient (an expert never selected has no ratio)
      double sum = 0;
      int defined = 0;
      for (size_t e = 0; e < l.gradient.vse.size(); ++e)
        if (l.gradient.score[e] > 0) {
          sum += l.gradient.vse[e] / l.gradient.score[e];
          ++defined;
        }
      o << "<td>" << num(l.rest.spearman) << "</td><td>" << num(l.rest.overlap) << "</td><td>"
        << (defined ? num(sum / defined, "%.3g") + " (" + std::to_string(defined) + " experts)" : std::string("n/a"))
        << "</td>";
    }
    if (shared) o << "<td>" << (l.has_neurons ? num(l.neurons.shared_share) : std::string("n/a")) << "</td>";
    o << "<td>" << (l.has_neurons ? num(l.neurons.scan.overlap_best) : std::string("n/a")) << "</td>";
    o << "</tr>\n";
  }
  o << "</table>\n";
}

void token_view(std::ostringstream& o, const AnalysisResult& r, size_t li) {
  const LayerAnalysis& l = r.layers[li];
  o << "<figure id=\"layer" << li << "-tokens\">\n<div class=\"legend\">";
  for (int64_t e = 0; e < l.n_experts; ++e)
    o << "<span style=\"background-color:" << palette_colour(size_t(e)) << "55\">expert " << e << "</span> ";
  o << "</div>\n<div class=\"tokens\">";
  for (size_t t = 0; t < l.example_expert.size() && t < r.example_pieces.size(); ++t) {
    const std::string piece = valid_utf8(r.example_pieces[t]);
    o << "<span title=\"expert " << l.example_expert[t] << "\" style=\"background-color:"
      << palette_colour(size_t(l.example_expert[t])) << "55\">";
    for (char ch : escape_xml(piece)) o << (ch == '\n' ? std::string("↵<br/>") : std::string(1, ch));
    o << "</span>";
  }
  o << "</div>\n<figcaption>Layer " << li << ": each token coloured by its top-1 expert.</figcaption>\n</figure>\n";
}

void layer_section(std::ostringstream& o, const AnalysisResult& r, size_t li) {
  const LayerAnalysis& l = r.layers[li];
  const std::string id = "layer" + std::to_string(li), L = "Layer " + std::to_string(li) + ": ";
  const std::vector<std::string> experts = expert_names(l.n_experts), legend = expert_names(l.n_experts, "expert ");
  o << "<h2 id=\"" << id << "\">Layer " << li << "</h2>\n";
  figure(o, id + "-load",
         bar_chart_svg(L + "expert load", "expert", "fraction of routed slots", experts, {{"load", {}, l.load}}, false,
                       1.0 / double(l.n_experts)),
         "Load entropy " + num(l.load_entropy) + " (1 = balanced); dashed line: uniform load 1/n.");
  std::vector<Series> hist;
  for (int64_t e = 0; e < l.n_experts; ++e) hist.push_back({legend[size_t(e)], {}, l.scores[size_t(e)].counts});
  const char* score_name = r.config.ffn.kind == nn::FfnKind::MoE ? "router logit" : "routing score ‖activation‖";
  figure(o, id + "-scores", histogram_svg(L + "routing-score distribution per expert", score_name, "tokens",
                                          l.scores.empty() ? std::vector<double>{} : l.scores[0].edges, hist),
         "Distribution of each expert's routing score over all analysed tokens.");
  figure(o, id + "-margin",
         histogram_svg(L + "margin between the K-th and (K+1)-th score", "margin", "tokens", l.margin.edges,
                       {{"margin", {}, l.margin.counts}}),
         "Mean " + num(l.margin_mean, "%.4g") + ", median " + num(l.margin_median, "%.4g") + ".");
  std::vector<Series> points(size_t(l.n_experts));
  for (int64_t e = 0; e < l.n_experts; ++e) points[size_t(e)].label = legend[size_t(e)];
  for (size_t p = 0; p < l.sample_score.size(); ++p) {
    points[size_t(l.sample_expert[p])].x.push_back(l.sample_score[p]);
    points[size_t(l.sample_expert[p])].y.push_back(l.sample_norm[p]);
  }
  std::string caption = "Spearman across experts " + num(l.full.spearman) + "; selected top-K agree with the top-K by full activation " +
                        num(100 * l.full.overlap, "%.1f") + "% (random " + num(100 * l.full.random_overlap, "%.1f") + "%).";
  if (l.has_rest)
    caption += " Against neurons r..D only (excluding the routing neurons themselves): Spearman " + num(l.rest.spearman) +
               ", overlap " + num(100 * l.rest.overlap, "%.1f") + "%.";
  figure(o, id + "-agreement", scatter_svg(L + "routing score vs full expert activation", score_name, "‖full activation‖", points),
         caption);
  if (l.has_gradient_paths) {
    figure(o, id + "-gradient-paths",
           bar_chart_svg(L + "gradient into the routing neurons, by path", "expert", "‖gradient‖", experts,
                         {{"via VSE", {}, l.gradient.vse},
                          {"via routing weights", {}, l.gradient.weights},
                          {"via aux loss", {}, l.gradient.aux},
                          {"full", {}, l.gradient.full}}),
           "Frobenius norms over W_gate[:, :r] and W_up[:, :r]: via VSE = through the virtual shared expert, "
               "via routing weights = through the top-K weights (the language-model loss and later layers), via aux "
               "loss = the layer's own auxiliary loss on its scores (load balance, top-p entropy), shown apart; on " +
               std::to_string(r.gradient_tokens) + " tokens; largest relative split error " +
               num(l.gradient_split_error, "%.2g") + ".");
  }
  token_view(o, r, li);
  html::neuron_sections(o, r, li);
}

}  // namespace

std::string report_html(const AnalysisResult& r, const std::string& title) {
  std::ostringstream o;
  o << html::page_start(title);
  o << "<h1>" << escape_xml(title) << "</h1>\n<p>" << escape_xml(html::ffn_summary(r.config)) << ". " << r.tokens
    << " tokens analysed in " << num(r.seconds, "%.1f") << " s. Metrics are defined in docs/METRICS.md.</p>\n";
  const std::vector<std::string> layers = [&] {
    std::vector<std::string> v;
    for (size_t li = 0; li < r.layers.size(); ++li) v.push_back("layer " + std::to_string(li));
    return v;
  }();
  std::vector<double> load_h, conf_h, overlap, random, rest_overlap;
  for (const LayerAnalysis& l : r.layers) {
    load_h.push_back(l.load_entropy);
    conf_h.push_back(l.confidence_entropy);
    overlap.push_back(l.full.overlap);
    random.push_back(l.full.random_overlap);
    rest_overlap.push_back(l.rest.overlap);
  }
  html::flags_section(o, routing_flags(r));
  // Table of contents: the flags, the summary, then each layer's figures.
  o << "<nav id=\"contents\"><h2>Contents</h2>\n<ul>\n<li><a href=\"#flags\">Flags</a></li>\n"
       "<li><a href=\"#summary\">Summary</a></li>\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const std::string id = "layer" + std::to_string(li);
    std::vector<std::pair<std::string, std::string>> parts = {
        {"-load", "load"}, {"-scores", "scores"}, {"-agreement", "score vs activation"}};
    if (r.layers[li].has_gradient_paths) parts.push_back({"-gradient-paths", "gradient paths"});
    parts.push_back({"-tokens", "tokens"});
    for (const auto& part : html::neuron_parts(r.layers[li])) parts.push_back(part);
    o << "<li><a href=\"#" << id << "\">Layer " << li << "</a>: ";
    for (size_t p = 0; p < parts.size(); ++p)
      o << (p ? ", " : "") << "<a href=\"#" << id << parts[p].first << "\">" << parts[p].second << "</a>";
    o << "</li>\n";
  }
  o << "</ul></nav>\n";
  o << "<h2 id=\"summary\">Summary</h2>\n";
  summary_table(o, r);
  figure(o, "summary-entropy",
         bar_chart_svg("Load and confidence entropy per layer", "layer", "normalised entropy", layers,
                       {{"load entropy", {}, load_h}, {"confidence entropy", {}, conf_h}}),
         "Load entropy 1 = every expert gets the same share; confidence entropy 0 = one selected expert takes all the weight.");
  std::vector<Series> agree = {{"score vs full activation", {}, overlap}};
  if (r.config.ffn.kind == nn::FfnKind::UoE) agree.push_back({"score vs neurons r..D", {}, rest_overlap});
  agree.push_back({"random selection", {}, random});
  figure(o, "summary-agreement",
         bar_chart_svg("Are neurons secretly routers? Top-K overlap per layer", "layer", "overlap", layers, agree),
         "Fraction of the selected experts that are also among the top-K experts by the norm of their full activation.");
  figure(o, "summary-load-heatmap", html::load_heatmap_svg(r, "Expert load, layers × experts"),
         "Fraction of each layer's routed slots that each expert takes (uniform: 1/n = " +
             num(r.layers.empty() ? 0.0 : 1.0 / double(r.layers[0].n_experts)) + ").");
  if (!r.layers.empty() && r.layers[0].has_neurons) {
    std::vector<double> best, first, chance;
    for (const LayerAnalysis& l : r.layers) {
      best.push_back(l.neurons.scan.overlap_best);
      first.push_back(l.neurons.scan.overlap_first);
      chance.push_back(l.neurons.scan.random_overlap);
    }
    const std::string rs = std::to_string(r.layers[0].neurons.scan.r);
    figure(o, "summary-scan",
           bar_chart_svg("Neuron scan: would the best " + rs + " neurons of each expert route like the router?",
                         "layer", "top-K overlap with the router", layers,
                         {{"best " + rs + " neurons", {}, best}, {"first " + rs + " neurons", {}, first},
                          {"random selection", {}, chance}}),
           "Per token, the experts with the largest norm over their best " + rs + " neurons (picked on half of the "
           "sampled tokens, tested on the other half) against the experts the router selected.");
  }
  for (size_t li = 0; li < r.layers.size(); ++li) layer_section(o, r, li);
  o << html::page_end();
  return o.str();
}

}  // namespace uoe::analysis
