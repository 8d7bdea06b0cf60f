// The analysis as CSV tables: one row per layer, per (layer, expert), per routing neuron, per bin or per token.
#include <sstream>

#include "analysis/report.h"
#include "analysis/routing_flags.h"

namespace uoe::analysis {
namespace {

// A CSV field holding any text: quoted, inner quotes doubled.
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

// A number, or an empty field where the analysis has none.
std::string cell(bool defined, double v) {
  if (!defined) return "";
  std::ostringstream o;
  o << v;
  return o.str();
}

std::string layers_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "layer,load_entropy,confidence_entropy,experts_per_token,margin_mean,margin_median,spearman_full,"
       "topk_overlap_full,topk_overlap_full_se,random_overlap,spearman_rest,topk_overlap_rest,shared_share,"
       "scan_overlap_best_r,scan_overlap_first_r\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    o << li << "," << l.load_entropy << "," << l.confidence_entropy << "," << l.experts_per_token << "," << l.margin_mean
      << "," << l.margin_median << "," << l.full.spearman << "," << l.full.overlap << "," << l.full.overlap_se << ","
      << l.full.random_overlap << "," << cell(l.has_rest, l.rest.spearman) << "," << cell(l.has_rest, l.rest.overlap)
      << "," << cell(l.has_neurons && l.neurons.has_shared, l.neurons.shared_share) << ","
      << cell(l.has_neurons, l.neurons.scan.overlap_best) << "," << cell(l.has_neurons, l.neurons.scan.overlap_first)
      << "\n";
  }
  return o.str();
}

std::string flags_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "layer,expert,flag,value,threshold,message\n";
  for (const RoutingFlag& f : routing_flags(r))
    o << f.layer << "," << (f.expert >= 0 ? std::to_string(f.expert) : std::string()) << "," << f.kind << "," << f.value
      << "," << f.threshold << "," << quoted(f.message) << "\n";
  return o.str();
}

// The per-(layer, expert) tables and the per-bin ones that the report had from the start.
void routing_tables(const AnalysisResult& r, std::vector<std::pair<std::string, std::string>>& out) {
  std::ostringstream load, scores, margins, agreement, gradient;
  load << "layer,expert,load\n";
  scores << "layer,expert,bin_lo,bin_hi,count\n";
  margins << "layer,bin_lo,bin_hi,count\n";
  agreement << "layer,expert,reference,spearman_over_tokens\n";
  gradient << "layer,expert,vse_norm,score_norm,routing_weights_norm,aux_loss_norm,full_norm,rest_norm,cosine_vse_score\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    for (size_t e = 0; e < l.load.size(); ++e) {
      load << li << "," << e << "," << l.load[e] << "\n";
      const Histogram& h = l.scores[e];
      for (size_t b = 0; b < h.counts.size(); ++b)
        scores << li << "," << e << "," << h.edges[b] << "," << h.edges[b + 1] << "," << h.counts[b] << "\n";
      agreement << li << "," << e << ",full," << l.full.spearman_expert[e] << "\n";
      if (l.has_rest) agreement << li << "," << e << ",rest," << l.rest.spearman_expert[e] << "\n";
      const PathNorms& g = l.gradient;
      if (l.has_gradient_paths)
        gradient << li << "," << e << "," << g.vse[e] << "," << g.score[e] << "," << g.weights[e] << "," << g.aux[e]
                 << "," << g.full[e] << "," << g.rest[e] << "," << g.cosine[e] << "\n";
    }
    for (size_t b = 0; b < l.margin.counts.size(); ++b)
      margins << li << "," << l.margin.edges[b] << "," << l.margin.edges[b + 1] << "," << l.margin.counts[b] << "\n";
  }
  out.insert(out.end(), {{"load", load.str()},
                         {"scores", scores.str()},
                         {"margins", margins.str()},
                         {"agreement", agreement.str()},
                         {"gradient_paths", gradient.str()}});
}

std::string neurons_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "layer,expert,neuron,activation_rate,mean_abs_activation,correlation_with_selection,grad_vse,"
       "grad_routing_weights,grad_aux_loss,grad_full\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    if (!l.has_neurons || !l.neurons.has_routing_neurons) continue;
    const RoutingNeuronStats& s = l.neurons.routing;
    const int64_t per_expert = int64_t(s.rate.size()) / l.n_experts;
    for (size_t i = 0; i < s.rate.size(); ++i) {
      const PathNorms& g = l.neuron_gradient;
      const bool grad = l.has_gradient_paths;
      o << li << "," << int64_t(i) / per_expert << "," << int64_t(i) % per_expert << "," << s.rate[i] << ","
        << s.mean_abs[i] << "," << s.corr[i] << "," << cell(grad, grad ? g.vse[i] : 0) << ","
        << cell(grad, grad ? g.weights[i] : 0) << "," << cell(grad, grad ? g.aux[i] : 0) << ","
        << cell(grad, grad ? g.full[i] : 0) << "\n";
    }
  }
  return o.str();
}

std::string scan_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "layer,expert,load,auc_best_r,auc_first_r,auc_all_neurons,auc_routing_score,best_neurons\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    if (!l.has_neurons) continue;
    const NeuronScan& s = l.neurons.scan;
    for (size_t e = 0; e < s.auc_best.size(); ++e) {
      std::string best;
      for (int64_t j : s.best[e]) {
        if (!best.empty()) best += ' ';
        best += std::to_string(j);
      }
      o << li << "," << e << "," << l.load[e] << "," << s.auc_best[e] << "," << s.auc_first[e] << "," << s.auc_all[e]
        << "," << s.auc_score[e] << "," << best << "\n";
    }
  }
  return o.str();
}

std::string coselection_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "layer,expert_a,expert_b,fraction_of_tokens\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    for (int64_t a = 0; a < l.n_experts && !l.coselection.empty(); ++a)
      for (int64_t b = 0; b < l.n_experts; ++b)
        o << li << "," << a << "," << b << "," << l.coselection[size_t(a * l.n_experts + b)] << "\n";
  }
  return o.str();
}

std::string top_tokens_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "layer,expert,rank,token_id,text,count,share\n";
  for (size_t li = 0; li < r.layers.size(); ++li)
    for (size_t e = 0; e < r.layers[li].top_tokens.size(); ++e) {
      const std::vector<TopToken>& list = r.layers[li].top_tokens[e];
      for (size_t k = 0; k < list.size(); ++k)
        o << li << "," << e << "," << k + 1 << "," << list[k].id << "," << quoted(list[k].text) << "," << list[k].count
          << "," << list[k].share << "\n";
    }
  return o.str();
}

std::string token_experts_table(const AnalysisResult& r) {
  std::ostringstream o;
  o << "position,text,layer,top_expert\n";
  for (size_t li = 0; li < r.layers.size(); ++li) {
    const LayerAnalysis& l = r.layers[li];
    for (size_t t = 0; t < l.example_expert.size() && t < r.example_pieces.size(); ++t)
      o << t << "," << quoted(r.example_pieces[t]) << "," << li << "," << l.example_expert[t] << "\n";
  }
  return o.str();
}

}  // namespace

std::vector<std::pair<std::string, std::string>> csv_tables(const AnalysisResult& r) {
  std::vector<std::pair<std::string, std::string>> out = {{"layers", layers_table(r)}, {"flags", flags_table(r)}};
  routing_tables(r, out);
  const bool uoe = r.config.ffn.kind == nn::FfnKind::UoE;
  if (uoe) out.push_back({"neurons", neurons_table(r)});
  out.insert(out.end(), {{"neuron_scan", scan_table(r)},
                         {"coselection", coselection_table(r)},
                         {"top_tokens", top_tokens_table(r)},
                         {"token_experts", token_experts_table(r)}});
  return out;
}

}  // namespace uoe::analysis
