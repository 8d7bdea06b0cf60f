// The analysis as data: stats.json and CSV tables (one row per layer and expert or bin).
#include <filesystem>
#include <sstream>

#include "analysis/report.h"
#include "core/atomic_file.h"

namespace uoe::analysis {
namespace {

json::Value array_of(const std::vector<double>& v) {
  json::Value a = json::Value::array();
  for (double x : v) a.push_back(x);
  return a;
}

json::Value to_json(const Agreement& g) {
  json::Value j = json::Value::object();
  j["spearman"] = g.spearman;
  j["spearman_per_expert"] = array_of(g.spearman_expert);
  j["topk_overlap"] = g.overlap;
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
    json::Value g = json::Value::object();
    g["vse"] = array_of(l.gradient.vse);
    g["score"] = array_of(l.gradient.score);
    g["full"] = array_of(l.gradient.full);
    g["rest"] = array_of(l.gradient.rest);
    g["cosine_vse_score"] = array_of(l.gradient.cosine);
    g["split_error"] = l.gradient_split_error;
    j["gradient_paths"] = g;
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
  return j;
}

void write_report(const std::string& dir, const AnalysisResult& r, const std::string& title) {
  std::filesystem::create_directories(dir);
  std::ostringstream load, scores, margins, agreement, gradient, tokens;
  load << "layer,expert,load\n";
  scores << "layer,expert,bin_lo,bin_hi,count\n";
  margins << "layer,bin_lo,bin_hi,count\n";
  agreement << "layer,expert,reference,spearman_over_tokens\n";
  gradient << "layer,expert,vse_norm,score_norm,full_norm,rest_norm,cosine_vse_score\n";
  tokens << "position,text,layer,top_expert\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    for (size_t e = 0; e < l.load.size(); ++e) {
      load << li << "," << e << "," << l.load[e] << "\n";
      const Histogram& h = l.scores[e];
      for (size_t b = 0; b < h.counts.size(); ++b)
        scores << li << "," << e << "," << h.edges[b] << "," << h.edges[b + 1] << "," << h.counts[b] << "\n";
      agreement << li << "," << e << ",full," << l.full.spearman_expert[e] << "\n";
      if (l.has_rest) agreement << li << "," << e << ",rest," << l.rest.spearman_expert[e] << "\n";
      if (l.has_gradient_paths)
        gradient << li << "," << e << "," << l.gradient.vse[e] << "," << l.gradient.score[e] << "," << l.gradient.full[e]
                 << "," << l.gradient.rest[e] << "," << l.gradient.cosine[e] << "\n";
    }
    for (size_t b = 0; b < l.margin.counts.size(); ++b)
      margins << li << "," << l.margin.edges[b] << "," << l.margin.edges[b + 1] << "," << l.margin.counts[b] << "\n";
    for (size_t t = 0; t < l.example_expert.size() && t < r.example_pieces.size(); ++t) {
      std::string piece;  // CSV-quoted text of the token
      for (char ch : r.example_pieces[t]) piece += ch == '"' ? std::string("\"\"") : std::string(1, ch);
      tokens << t << ",\"" << piece << "\"," << li << "," << l.example_expert[t] << "\n";
    }
  }
  write_file_atomic(dir + "/load.csv", load.str());
  write_file_atomic(dir + "/scores.csv", scores.str());
  write_file_atomic(dir + "/margins.csv", margins.str());
  write_file_atomic(dir + "/agreement.csv", agreement.str());
  write_file_atomic(dir + "/gradient_paths.csv", gradient.str());
  write_file_atomic(dir + "/token_experts.csv", tokens.str());
  write_file_atomic(dir + "/stats.json", to_json(r).dump(2) + "\n");
  write_file_atomic(dir + "/report.html", report_html(r, title));
}

}  // namespace uoe::analysis
