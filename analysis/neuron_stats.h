// Neuron-level analysis of one expert layer on the tokens sampled for the activation studies
// (docs/METRICS.md "Neurons"):
// - UoE: per routing neuron, its activation rate, mean |activation| and correlation with its expert being selected;
// - every expert kind: the neuron scan, which asks the UoE paper's question of any checkpoint: would the norm of an
//   expert's best r neurons route as well as its router?
// - the share of the layer output carried by the shared part (UoE's virtual shared expert, MoE's shared expert).
#pragma once
#include <cstdint>
#include <vector>

#include "nn/ffn.h"

namespace uoe::analysis {

// The sampled tokens of one layer and how the layer routed them.
struct LayerSample {
  Tensor input;                  // [S, d] the FFN inputs
  Tensor weights;                // [S, K] routing weights
  std::vector<double> scores;    // [S·n] routing scores
  std::vector<int64_t> indices;  // [S·K] selected experts (-1 = empty slot)
  int64_t tokens() const { return input.defined() ? input.size(0) : 0; }
};

// Per routing neuron of a UoE layer, index e·r + j for neuron j of expert e, over the sampled tokens.
struct RoutingNeuronStats {
  std::vector<double> rate;      // fraction of tokens whose gate pre-activation g is positive (silu's open side)
  std::vector<double> mean_abs;  // mean |H| (H = silu(g) ⊙ up, the activation the VSE and the score read)
  std::vector<double> corr;      // Pearson correlation of |H| with "expert e selected" (NaN when either is constant)
};

// For each expert: how well a norm over r of its neurons predicts that the router selects it (AUC over held-out
// tokens), with the neurons picked on the other half of the sample by their correlation with the selection.
struct NeuronScan {
  int64_t r = 0;                               // neurons per expert in the norms (the model's routing_neurons)
  std::vector<double> auc_best;                // [n] norm of the best r neurons
  std::vector<double> auc_first;               // [n] norm of neurons [0, r) (UoE: the routing neurons themselves)
  std::vector<double> auc_all;                 // [n] norm of all D neurons
  std::vector<double> auc_score;               // [n] the routing score itself
  std::vector<std::vector<int64_t>> best;      // [n][r] the neurons picked, best first
  double overlap_best = 0, overlap_first = 0;  // token-level: top-k experts by that norm vs the selected ones
  double random_overlap = 0;                   // the same for a uniformly random choice (mean k / n)
  int64_t pick_tokens = 0, test_tokens = 0;    // the two halves of the sample
};

struct NeuronAnalysis {
  bool has_routing_neurons = false;  // UoE
  RoutingNeuronStats routing;
  NeuronScan scan;
  bool has_shared = false;           // UoE (the VSE) or MoE with a shared expert
  double shared_share = 0;           // mean over tokens of ‖y_shared‖ / (‖y_shared‖ + ‖y_routed‖)
};

// The neuron analysis of `ffn` (MoeFfn, AoeFfn or UoeFfn) on `sample` (at least two tokens for the scan).
NeuronAnalysis analyze_neurons(const nn::Ffn& ffn, const LayerSample& sample);

}  // namespace uoe::analysis
