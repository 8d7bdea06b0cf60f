// The routing statistics that `uoe train` logs at each evaluation (metrics.jsonl "routing", docs/METRICS.md): on a
// fixed sample of validation tokens, per layer the routing agreement (the routing score's top-K against the top-K
// of every expert's full activation norm), the load entropy, and for UoE the norms of the two gradient paths into
// the routing neurons (through the virtual shared expert, through the scores).
#pragma once
#include <cstdint>

#include "core/json.h"
#include "nn/dataset.h"
#include "nn/transformer.h"

namespace uoe::analysis {

class RoutingProbe {
 public:
  // The sample: the first max(1, tokens / seq) windows of `seq` tokens of the validation split (no random draw).
  RoutingProbe(const nn::TokenDataset& data, int64_t seq, int64_t tokens);

  // One forward of the sample (UoE: and its backward, into gradients it clears again) in evaluation mode:
  // {"tokens": T, "seconds": s, "layers": [{"agreement", "agreement_chance", "load_entropy"[, "grad_vse",
  // "grad_score"]}, ...]}. The weights, the random generator and the model's mode are left as they were.
  // model: routed layers (MoE, AoE or UoE), every expert on this process.
  json::Value operator()(nn::LanguageModel& model) const;

 private:
  nn::Batch sample_;  // [rows, seq] on the CPU
};

}  // namespace uoe::analysis
