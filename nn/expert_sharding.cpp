// ExpertSharding: which parameters expert parallelism split, slicing checkpoints and gathering them back.
#include "nn/expert_sharding.h"

#include "core/error.h"
#include "nn/expert_parallel.h"

namespace uoe::nn {

ExpertSharding::ExpertSharding(LanguageModel& model, Communicator& group) : group_(&group) {
  for (size_t i = 0; i < model.blocks.size(); ++i) {
    Ffn& ffn = *model.blocks[i]->ffn;
    if (!ffn.experts()) continue;
    ffn.shard_experts(group);
    for (const char* w : {"w_gate", "w_up", "w_down"}) names_.insert("blocks." + std::to_string(i) + ".ffn." + w);
  }
}

bool ExpertSharding::sharded(const std::string& key) const {
  if (names_.count(key)) return true;
  const size_t dot = key.rfind('.');
  return dot != std::string::npos && names_.count(key.substr(0, dot));
}

std::map<std::string, Tensor> ExpertSharding::slice(const std::map<std::string, Tensor>& full) const {
  std::map<std::string, Tensor> out = full;
  for (auto& [key, t] : out) {
    if (!sharded(key)) continue;
    const int64_t P = group_->size(), rows = t.dim() > 0 ? t.size(0) : 0;
    UOE_CHECK(rows % P == 0, "[expert parallel] '", key, "' has ", rows, " experts, which do not split across ", P,
              " ranks");
    t = t.narrow(0, group_->rank() * (rows / P), rows / P).contiguous();
  }
  return out;
}

DeferredTensors ExpertSharding::gather(const DeferredTensors& local) const {
  DeferredTensors out;
  for (const DeferredTensor& t : local) {
    if (!sharded(t.name)) {
      out.push_back(t);
      continue;
    }
    Shape full = t.shape;
    full[0] *= group_->size();
    Communicator* group = group_;
    out.push_back({t.name, t.dtype, full, [slice = t.produce, group] {
                     return all_gather_rows(slice().detach(), *group);  // detached: nothing recorded
                   }});
  }
  return out;
}

}  // namespace uoe::nn
