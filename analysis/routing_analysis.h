// Routing analysis of a trained MoE / AoE / UoE language model: expert load and its entropy, routing
// confidence, score and margin distributions, "are neurons secretly routers?" (routing score versus every
// expert's full activation), the two gradient paths into UoE's routing neurons, and token → expert
// examples. docs/METRICS.md defines every number.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "analysis/gradient_paths.h"
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
  // Load, confidence, scores and margins of every token of `trace`.
  void add_routing(const nn::RoutingTrace& trace);
  // Score-vs-activation agreement on the trace's rows `rows` (full activations of every expert).
  void add_activations(const nn::Ffn& ffn, const nn::RoutingTrace& trace, const std::vector<int64_t>& rows);
  LayerAnalysis finish(int64_t bins) const;

 private:
  struct AgreementSums {
    double spearman = 0, overlap = 0, random_overlap = 0;
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
};

// Every expert's activation norm ‖silu(g_i W_gate[i]) ⊙ (x W_up[i])‖ over neurons [lo, hi) (hi < 0: D),
// g_i = x (AoE: x's factorised-gate projection): [T, n]. ffn: MoeFfn, AoeFfn or UoeFfn; x: [T, d].
Tensor expert_activation_norms(const nn::Ffn& ffn, const Tensor& x, int64_t lo, int64_t hi = -1);

// Runs the whole analysis on `model` over `data`'s validation split (wrapping to the start of the file
// when it is shorter than options.tokens, which must not exceed the file's tokens).
AnalysisResult analyze(nn::LanguageModel& model, const nn::TokenFile& data, int64_t val_begin,
                       const nn::Tokenizer& tokenizer, const AnalysisOptions& options);

}  // namespace uoe::analysis
