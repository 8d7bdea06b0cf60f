// Causal multi-head self-attention with RoPE and grouped-query heads.
#pragma once
#include "nn/layers.h"

namespace uoe::nn {

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t d, int64_t heads, int64_t kv_heads, double rope_base, double out_std);
  Tensor forward(const Tensor& x) const;  // x: [B, T, d] -> [B, T, d]
  std::shared_ptr<Linear> wq, wk, wv, wo;
  int64_t heads, kv_heads, head_dim;
  double rope_base;
};

}  // namespace uoe::nn
