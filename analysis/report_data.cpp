// The analysis as data: stats.json and CSV tables (one row per layer and expert or bin).
#include <cmath>
#include <filesystem>
#include <sstream>

#include "analysis/report.h"
#include "analysis/routing_flags.h"
#include "core/atomic_file.h"

namespace uoe::analysis {
namespace {

// A number, or null where it is undefined (NaN: e.g. an AUC without both outcomes); JSON has no NaN.
json::Value number(double x) { return std::isfinite(x) ? json::Value(x) : json::Value(nullptr); }

json::Value array_of(const std::vector<double>& v) {
  json::Value a = json::Value::array();
  for (double x : v) a.push_back(number(x));
  return a;
}

json::Value to_json(const NeuronScan& s) {
  json::Value j = json::Value::object();
  j["r"] = s.r;
  j["pick_tokens"] = s.pick_tokens;
  j["test_tokens"] = s.test_tokens;
  j["auc_best_r"] = array_of(s.auc_best);
  j["auc_first_r"] = array_of(s.auc_first);
  j["auc_all_neurons"] = array_of(s.auc_all);
  j["auc_routing_score"] = array_of(s.auc_score);
  json::Value best = json::Value::array();
  for (const auto& neurons : s.best) {
    json::Value b = json::Value::array();
    for (int64_t i : neurons) b.push_back(i);
    best.push_back(b);
  }
  j["best_neurons"] = best;
  j["topk_overlap_best_r"] = s.overlap_best;
  j["topk_overlap_first_r"] = s.overlap_first;
  j["random_overlap"] = s.random_overlap;
  return j;
}

json::Value to_json(const PathNorms& p) {
  json::Value g = json::Value::object();
  g["vse"] = array_of(p.vse);
  g["score"] = array_of(p.score);
  g["routing_weights"] = array_of(p.weights);
  g["aux_loss"] = array_of(p.aux);
  g["full"] = array_of(p.full);
  g["rest"] = array_of(p.rest);
  g["cosine_vse_score"] = array_of(p.cosine);
  return g;
}

json::Value to_json(const std::vector<std::vector<TopToken>>& top) {
  json::Value experts = json::Value::array();
  for (const auto& list : top) {
    json::Value tokens = json::Value::array();
    for (const TopToken& t : list) {
      json::Value x = json::Value::object();
      x["id"] = t.id;
      x["text"] = t.text;
      x["count"] = t.count;
      x["share"] = t.share;
      tokens.push_back(x);
    }
    experts.push_back(tokens);
  }
  return experts;
}

json::Value to_json(const Agreement& g) {
  json::Value j = json::Value::object();
  j["spearman"] = g.spearman;
  j["spearman_per_expert"] = array_of(g.spearman_expert);
  j["topk_overlap"] = g.overlap;
  j["topk_overlap_standard_error"] = g.overlap_se;
  j["tokens"] = g.tokens;
  j["random_overlap"] = g.random_overlap;
  return j;
}

json::Value to_json(const Histogram& h) {
  json::Value j = json::Value::object();
  j["edges"] = array_of(h.edges);
  j["counts"] = array_of(h.counts);
  return j;
}

json::Value to_json(const LayerAnalysis& l) {
  json::Value j = json::Value::object();
  j["load"] = array_of(l.load);
  j["load_entropy"] = l.load_entropy;
  j["confidence_entropy"] = l.confidence_entropy;
  j["experts_per_token"] = l.experts_per_token;
  json::Value scores = json::Value::array();
  for (const Histogram& h : l.scores) scores.push_back(to_json(h));
  j["score_histograms"] = scores;
  j["margin"] = to_json(l.margin);
  j["margin_mean"] = l.margin_mean;
  j["margin_median"] = l.margin_median;
  j["score_vs_full_activation"] = to_json(l.full);
  if (l.has_rest) j["score_vs_rest_activation"] = to_json(l.rest);
  if (l.has_gradient_paths) {
    json::Value g = to_json(l.gradient);
    g["split_error"] = l.gradient_split_error;
    j["gradient_paths"] = g;
  }
  json::Value coselection = json::Value::array();
  for (int64_t a = 0; a < l.n_experts && !l.coselection.empty(); ++a)
    coselection.push_back(array_of({l.coselection.begin() + a * l.n_experts, l.coselection.begin() + (a + 1) * l.n_experts}));
  j["coselection"] = coselection;
  j["top_tokens"] = to_json(l.top_tokens);
  if (l.has_neurons) {
    j["neuron_scan"] = to_json(l.neurons.scan);
    if (l.neurons.has_shared) j["shared_share"] = l.neurons.shared_share;
    if (l.neurons.has_routing_neurons) {
      json::Value n = json::Value::object();
      n["activation_rate"] = array_of(l.neurons.routing.rate);
      n["mean_abs_activation"] = array_of(l.neurons.routing.mean_abs);
      n["correlation_with_selection"] = array_of(l.neurons.routing.corr);
      if (l.has_gradient_paths) n["gradient_paths"] = to_json(l.neuron_gradient);
      j["routing_neurons"] = n;
    }
  }
  return j;
}

}  // namespace

json::Value to_json(const AnalysisResult& r) {
  json::Value j = json::Value::object();
  j["config"] = nn::to_json(r.config);
  j["tokens"] = r.tokens;
  j["gradient_tokens"] = r.gradient_tokens;
  j["seconds"] = r.seconds;
  json::Value layers = json::Value::array();
  for (const LayerAnalysis& l : r.layers) layers.push_back(to_json(l));
  j["layers"] = layers;
  json::Value flags = json::Value::array();
  for (const RoutingFlag& f : routing_flags(r)) {
    json::Value x = json::Value::object();
    x["kind"] = f.kind;
    x["layer"] = f.layer;
    x["expert"] = f.expert;
    x["value"] = f.value;
    x["threshold"] = f.threshold;
    x["message"] = f.message;
    flags.push_back(x);
  }
  j["flags"] = flags;
  return j;
}

void write_report(const std::string& dir, const AnalysisResult& r, const std::string& title) {
  std::filesystem::create_directories(dir);
  for (const auto& [name, text] : csv_tables(r)) write_file_atomic(dir + "/" + name + ".csv", text);
  write_file_atomic(dir + "/stats.json", to_json(r).dump(2) + "\n");
  write_file_atomic(dir + "/report.html", report_html(r, title));
}

}  // namespace uoe::analysis
