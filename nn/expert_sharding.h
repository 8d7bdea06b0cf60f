// Expert parallelism for a whole model: every expert FFN keeps only its group rank's share of the experts, and
// the conversions between those slices and the full tensors that checkpoints hold.
#pragma once
#include <map>
#include <set>
#include <string>

#include "core/communicator.h"
#include "core/deferred_tensor.h"
#include "nn/module.h"
#include "nn/transformer.h"

namespace uoe::nn {

class ExpertSharding {
 public:
  ExpertSharding() = default;  // nothing sharded
  // Shards the experts of every expert FFN of `model` across `group` (Ffn::shard_experts): rank p keeps rows
  // [p·n/E, (p+1)·n/E) of each W_gate, W_up, W_down. A dense model has nothing to shard.
  ExpertSharding(LanguageModel& model, Communicator& group);

  // Whether a parameter ("blocks.0.ffn.w_up") or optimiser state entry ("blocks.0.ffn.w_up.exp_avg") is sharded.
  bool sharded(const std::string& key) const;
  // Full tensors (a checkpoint) -> this rank's rows of the sharded ones; the others as they are.
  std::map<std::string, Tensor> slice(const std::map<std::string, Tensor>& full) const;
  // This rank's rows -> the full tensors, each gathered over the group when it is produced (collective: every
  // rank of the group produces the same tensors in the same order).
  DeferredTensors gather(const DeferredTensors& local) const;

 private:
  Communicator* group_ = nullptr;
  std::set<std::string> names_;  // the sharded parameters
};

}  // namespace uoe::nn
