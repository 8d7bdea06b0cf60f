// Causal multi-head self-attention with RoPE and grouped-query heads.
#pragma once
#include "nn/layers.h"

namespace uoe::nn {

// One layer's keys and values of the tokens already seen, for generation (nn::KvCache): [B, capacity, Hkv, Dh]
// each, allocated by the first forward that fills it.
struct KvLayer {
  Tensor k, v;
  int64_t capacity = 0;
};

class CausalSelfAttention : public Module {
 public:
  CausalSelfAttention(int64_t d, int64_t heads, int64_t kv_heads, double rope_base, double out_std);
  // x: [B, T, d] -> [B, T, d]. With a cache, x holds the tokens at positions [pos, pos + T): their keys and values
  // join the cache's first pos and the queries attend to all of them; either the prompt (pos = 0) or one token.
  Tensor forward(const Tensor& x, KvLayer* cache = nullptr, int64_t pos = 0) const;
  std::shared_ptr<Linear> wq, wk, wv, wo;
  int64_t heads, kv_heads, head_dim;
  double rope_base;
};

}  // namespace uoe::nn
