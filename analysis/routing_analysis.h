// Routing analysis of a trained MoE / AoE / UoE language model: expert load and its entropy, routing
// confidence, score and margin distributions, "are neurons secretly routers?" (routing score versus every
// expert's full activation), the two gradient paths into UoE's routing neurons, and token → expert
// examples. docs/METRICS.md defines every number.
#pragma once
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "analysis/expert_activations.h"
#include "analysis/gradient_paths.h"
#include "analysis/neuron_stats.h"
#include "nn/dataset.h"
#include "nn/tokenizer.h"
#include "nn/transformer.h"

namespace uoe::analysis {

struct AnalysisOptions {
  int64_t tokens = 65536;              // tokens run through the model (windows of `seq` from the validation split)
  int64_t seq = 0;                     // window length (0: the model's context)
  int64_t batch = 8;                   // windows per forward
  int64_t activation_tokens = 2048;    // tokens sampled (evenly) for the score-vs-full-activation study
  int64_t gradient_windows = 4;        // windows of the batch whose gradient paths are measured
  int64_t example_tokens = 512;        // tokens shown coloured by their top expert
  int64_t bins = 40;                   // histogram bins
  // Called after each forward batch with the windows done and the windows in all (a progress display); optional.
  std::function<void(int64_t done, int64_t total)> on_batch;
};

// Agreement between a routing score and a per-expert reference (the expert's activation norm).
struct Agreement {
  double spearman = 0;                   // mean over tokens of the rank correlation across experts
  std::vector<double> spearman_expert;   // [n] rank correlation over tokens, per expert
  double overlap = 0;                    // mean |selected ∩ top-|selected| by reference| / |selected|
  double random_overlap = 0;             // the same for a uniformly random selection: mean k_t / n
  double overlap_se = 0;                 // standard error of `overlap` (per-token spread / √tokens)
  int64_t tokens = 0;                    // tokens compared
};

// A token that an expert takes often and mostly (docs/METRICS.md "Top tokens per expert").
struct TopToken {
  int64_t id = 0;
  std::string text;   // decoded
  int64_t count = 0;  // times this token was routed to the expert (any slot)
  double share = 0;   // count / occurrences of the token: the fraction of them the expert took
};

struct Histogram {
  std::vector<double> edges;   // bins + 1
  std::vector<double> counts;  // bins
};

struct LayerAnalysis {
  int64_t n_experts = 0, slots = 0;       // n and K (top-p: the most experts a token may take)
  std::vector<double> load;               // [n] fraction of routed (token, slot) pairs; sums to 1
  double load_entropy = 0;                // H(load) / log n: 1 = perfectly balanced
  double confidence_entropy = 0;          // mean_t H(w_t) / log K of the routing weights (0 when K = 1)
  double experts_per_token = 0;           // mean number of selected experts (top-p varies)
  std::vector<Histogram> scores;          // [n] routing-score distribution per expert (shared edges)
  Histogram margin;                       // s_(k) − s_(k+1) per token, k = its number of selected experts
  double margin_mean = 0, margin_median = 0;
  Agreement full;                         // score vs ‖activation over all D neurons‖
  Agreement rest;                         // UoE only: score vs ‖activation over neurons [r, D)‖
  bool has_rest = false;
  std::vector<double> sample_score, sample_norm;  // scatter sample: (score, full norm) pairs
  std::vector<int64_t> sample_expert;
  bool has_gradient_paths = false;        // UoE only
  PathNorms gradient;                     // per expert
  double gradient_split_error = 0;        // max_i ‖full − vse − score − (selected path)‖ / ‖full‖ with combine = vse
  std::vector<int64_t> example_expert;    // top expert of each example token
  std::vector<double> coselection;        // [n·n] fraction of tokens that selected both i and j (diagonal: i at all)
  std::vector<std::vector<TopToken>> top_tokens;  // [n] best first (empty when the token ids were not given)
  bool has_neurons = false;               // the sampled tokens' neuron analysis (neuron_stats.h)
  NeuronAnalysis neurons;
  PathNorms neuron_gradient;              // UoE: the gradient paths per routing neuron, index e·r + j
};

struct AnalysisResult {
  nn::ModelConfig config;
  int64_t tokens = 0;                       // tokens analysed
  int64_t gradient_tokens = 0;              // tokens of the gradient-path batch
  std::vector<std::string> example_pieces;  // decoded text of each example token
  std::vector<LayerAnalysis> layers;        // empty for a dense model
  double seconds = 0;
};

// Accumulates one layer's statistics over forwards (from its RoutingTrace), then summarises them.
class LayerAccumulator {
 public:
  LayerAccumulator(int64_t n_experts, int64_t slots);
  // Load, confidence, scores, margins and co-selection of every token of `trace`; with the token `ids` (one per
  // trace row), the counts behind the top tokens per expert too.
  void add_routing(const nn::RoutingTrace& trace, const std::vector<int64_t>& ids = {});
  // Score-vs-activation agreement on the trace's rows `rows` (full activations of every expert); the rows join
  // the sample of the neuron analysis.
  void add_activations(const nn::Ffn& ffn, const nn::RoutingTrace& trace, const std::vector<int64_t>& rows);
  // The summary; top_tokens without their text, which the caller decodes.
  LayerAnalysis finish(int64_t bins) const;
  // The rows given to add_activations so far, with their routing.
  LayerSample sample() const;

 private:
  struct AgreementSums {
    double spearman = 0, overlap = 0, overlap_squares = 0, random_overlap = 0;
    int64_t ranked = 0, tokens = 0;
    std::vector<std::vector<double>> score, norm;  // [n][tokens] for the per-expert correlation
  };
  void add_agreement(AgreementSums& a, const std::vector<double>& s, const std::vector<double>& ref,
                     const std::vector<int64_t>& selected);
  static Agreement summarise(const AgreementSums& a);
  int64_t n_, slots_;
  std::vector<double> count_;
  double routed_ = 0, confidence_sum_ = 0, selected_sum_ = 0;
  int64_t tokens_ = 0;
  std::vector<std::vector<double>> scores_;  // [n][tokens]
  std::vector<double> margins_;
  AgreementSums full_, rest_;
  bool has_rest_ = false;
  std::vector<double> sample_score_, sample_norm_;
  std::vector<int64_t> sample_expert_;
  std::vector<double> coselected_;                     // [n·n] tokens that selected both
  std::map<int64_t, std::vector<int64_t>> token_experts_;  // token id -> [n + 1] times routed to each, occurrences
  std::vector<Tensor> sample_inputs_, sample_weights_;  // per add_activations call: [S_c, d], [S_c, K]
  std::vector<double> sample_scores_;                   // [S·n]
  std::vector<int64_t> sample_indices_;                 // [S·K]
};

// The `count` tokens of each expert ranked by count × share (frequent in the expert and mostly sent to it), from
// the counts per token id ([n + 1]: routed to each expert, occurrences).
std::vector<std::vector<TopToken>> top_tokens(const std::map<int64_t, std::vector<int64_t>>& counts, int64_t n,
                                              size_t count);

// Runs the whole analysis on `model` over `data`'s validation split (wrapping to the start of the file
// when it is shorter than options.tokens, which must not exceed the file's tokens).
AnalysisResult analyze(nn::LanguageModel& model, const nn::TokenFile& data, int64_t val_begin,
                       const nn::Tokenizer& tokenizer, const AnalysisOptions& options);

}  // namespace uoe::analysis
