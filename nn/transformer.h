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
  // x: [B, T, d] -> [B, T, d]; attention and FFN run in `compute` (e.g. bfloat16) when set.
  Tensor forward(const Tensor& x, std::optional<DType> compute = std::nullopt);
  std::shared_ptr<RMSNorm> attn_norm, ffn_norm;
  std::shared_ptr<CausalSelfAttention> attn;
  std::shared_ptr<Ffn> ffn;
};

class LanguageModel : public Module {
 public:
  explicit LanguageModel(const ModelConfig& c);
  Tensor forward(const Tensor& ids);  // ids: [B, T] int -> logits [B, T, vocab]
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
  Tensor checkpointed(Block& block, const Tensor& x) const;
};

}  // namespace uoe::nn
