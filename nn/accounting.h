// Model accounting from a configuration alone: total and active parameters, FLOPs per token, training memory.
#pragma once
#include "nn/config.h"

namespace uoe::nn {

struct ModelCounts {
  double total = 0, active = 0;  // parameters (active: those one token uses)
  double flops = 0;              // forward FLOPs per token at full context
  double memory = 0;             // bytes to train with AdamW in float32 at batch 16 x context
};

ModelCounts count_model(const ModelConfig& c);

}  // namespace uoe::nn
