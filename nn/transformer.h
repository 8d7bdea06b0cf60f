// Pre-norm Transformer block and the decoder-only language model (tied or untied head).
#pragma once
#include <memory>
#include <optional>
#include <vector>

#include "nn/attention.h"
#include "nn/config.h"
#include "nn/ffn.h"

namespace uoe::nn {

class Block : public Module {
 public:
  Block(const ModelConfig& c, double out_std);
  // x: [B, T, d] -> y [B, T, d] and the FFN's auxiliary loss; attention and FFN run in `compute` (e.g. bfloat16)
  // when set. With a cache: the tokens at positions [pos, pos + T) (CausalSelfAttention::forward).
  FfnOut forward(const Tensor& x, std::optional<DType> compute = std::nullopt, KvLayer* cache = nullptr,
                 int64_t pos = 0);
  std::shared_ptr<RMSNorm> attn_norm, ffn_norm;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Ffn> ffn;
};

// Keys and values of every layer for the tokens a model has seen (generation without recomputing them):
// LanguageModel::forward(ids, &cache) runs ids at positions [length, length + T) and appends them.
struct KvCache {
  std::vector<KvLayer> layers;
  int64_t length = 0;  // tokens cached; at most the model's context
  void clear() { length = 0; }
};

class LanguageModel : public Module {
 public:
  explicit LanguageModel(const ModelConfig& c);
  // ids: [B, T] int -> logits [B, T, vocab]. With a cache (inference, no gradients): ids follow the cached tokens,
  // the whole prompt into an empty cache or one token at a time.
  Tensor forward(const Tensor& ids, KvCache* cache = nullptr) { return run(ids, cache).logits; }
  KvCache new_cache() const;  // empty, for up to config.context tokens
  // Mixed precision: attention, FFNs and the head (and the weights as each layer uses them) compute in this
  // dtype, e.g. bfloat16, while the parameters, norms, residual stream, router and loss stay float32.
  // Unset: everything in the parameters' dtype.
  std::optional<DType> compute_dtype;
  // Activation checkpointing per block: only each block's input is kept for backward, which recomputes the
  // block (one more forward; memory for activations drops to one [B, T, d] tensor per block).
  bool checkpoint_activations = false;
  // Mean next-token cross-entropy plus every layer's auxiliary loss.
  Tensor loss(const Tensor& ids, const Tensor& targets);
  // Cross-entropy alone, from the last forward's logits.
  Tensor last_ce;
  std::vector<FfnStats> layer_stats() const;

  ModelConfig config;
  std::shared_ptr<Embedding> embed;
  std::vector<std::shared_ptr<Block>> blocks;
  std::shared_ptr<RMSNorm> final_norm;
  std::shared_ptr<Linear> head;  // null when tied to the embedding

 private:
  struct Output {
    Tensor logits;            // [B, T, vocab]
    std::vector<Tensor> aux;  // the layers' auxiliary losses, in layer order (the defined ones)
  };
  Output run(const Tensor& ids, KvCache* cache);
  FfnOut checkpointed(Block& block, const Tensor& x) const;
};

}  // namespace uoe::nn
