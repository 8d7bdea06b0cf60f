// Pre-norm Transformer: x + attn(norm(x)), then x + ffn(norm(x)); embedding in, tied or untied head out.
#include "nn/transformer.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "nn/activation_checkpoint.h"
#include "ops/ops.h"

namespace uoe::nn {

Block::Block(const ModelConfig& c, double out_std) {
  attn_norm = register_module("attn_norm", std::make_shared<RMSNorm>(c.d_model, c.norm_eps));
  attn = register_module("attn", std::make_shared<CausalSelfAttention>(c.d_model, c.n_heads, c.n_kv_heads,
                                                                        c.rope_base, out_std));
  ffn_norm = register_module("ffn_norm", std::make_shared<RMSNorm>(c.d_model, c.norm_eps));
  ffn = register_module("ffn", make_ffn(c, out_std));
}

Tensor Block::forward(const Tensor& x, std::optional<DType> compute, KvLayer* cache, int64_t pos) {
  const int64_t B = x.size(0), T = x.size(1), d = x.size(2);
  // Norms and the residual stream in x's dtype; attention and the FFN in the compute dtype.
  auto in = [&](const Tensor& t) { return compute ? t.to(*compute) : t; };
  const Tensor h = x + attn->forward(in(attn_norm->forward(x)), cache, pos).to(x.dtype());  // [B, T, d]
  const Tensor f = ffn->forward(in(ffn_norm->forward(h)).reshape({B * T, d}));             // [B·T, d]
  return h + f.view({B, T, d}).to(x.dtype());
}

LanguageModel::LanguageModel(const ModelConfig& c) : config(c) {
  check_model_config(c, "the model '" + c.name + "'");  // a size out of bounds fails here, not after allocating
  // Residual output projections scaled down with depth (GPT-2)
  const double out_std = 0.02 / std::sqrt(2.0 * double(c.n_layers));
  embed = register_module("embed", std::make_shared<Embedding>(c.vocab_size, c.d_model));
  for (int64_t i = 0; i < c.n_layers; ++i)
    blocks.push_back(register_module("blocks." + std::to_string(i), std::make_shared<Block>(c, out_std)));
  final_norm = register_module("final_norm", std::make_shared<RMSNorm>(c.d_model, c.norm_eps));
  if (!c.tied_embeddings) head = register_module("head", std::make_shared<Linear>(c.d_model, c.vocab_size));
}

Tensor LanguageModel::forward(const Tensor& ids, KvCache* cache) {
  UOE_CHECK(ids.dim() == 2 && ids.size(1) <= config.context, "[model] ids must be [B, T] with T <= context ",
            config.context, ", got ", shape_str(ids.shape()));
  UOE_CHECK(!cache || (!autograd::grad_enabled() && cache->layers.size() == blocks.size()),
            "[model] a cached forward is for inference (NoGradGuard) with a cache from new_cache()");
  const int64_t pos = cache ? cache->length : 0;
  // [B, T, d]: the residual stream in the parameters' dtype, but float32 when they are stored in bfloat16
  Tensor x = embed->forward(ids);
  if (is_reduced_float(x.dtype())) x = x.to(DType::Float32);
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (cache) x = blocks[i]->forward(x, compute_dtype, &cache->layers[i], pos);
    else x = checkpoint_activations ? checkpointed(*blocks[i], x) : blocks[i]->forward(x, compute_dtype);
  }
  if (cache) cache->length += ids.size(1);
  x = final_norm->forward(x);
  if (compute_dtype) x = x.to(*compute_dtype);
  return head ? head->forward(x) : ops::matmul(x, embed->weight.to(x.dtype()).mT());  // [B, T, vocab]
}

KvCache LanguageModel::new_cache() const {
  KvCache cache;
  cache.layers.assign(blocks.size(), KvLayer{Tensor(), Tensor(), config.context});
  return cache;
}

Tensor LanguageModel::checkpointed(Block& block, const Tensor& x) const {
  // The block's output and its auxiliary loss (when it has one) leave the checkpoint together, so the loss's
  // gradient reaches the router through the recomputation too. The loss leaves only that way: the recomputation
  // in backward must not leave its graph (and with it the block's input and gradient) in FfnStats; it puts back
  // the forward's loss (set below) as a value, without the packed output buffer it is a view of, so that after
  // backward FfnStats holds the loss as it does without checkpointing.
  const std::optional<DType> compute = compute_dtype;
  const std::vector<Tensor> out = checkpoint(
      [&block, compute](const Tensor& in) {
        Tensor& aux = block.ffn->stats.aux_loss;
        const Tensor forward_aux = aux.defined() ? aux.detach().clone() : Tensor();
        std::vector<Tensor> o = {block.forward(in, compute)};
        if (aux.defined()) {
          o.push_back(aux.to(o[0].dtype()));
          aux = forward_aux;
        }
        return o;
      },
      x);
  if (out.size() > 1) block.ffn->stats.aux_loss = out[1];
  return out[0];
}

Tensor LanguageModel::loss(const Tensor& ids, const Tensor& targets) {
  const Tensor logits = forward(ids);              // [B, T, vocab] in the compute dtype
  last_ce = ops::cross_entropy(logits, targets);  // float32 whatever the compute dtype
  Tensor total = last_ce;
  for (auto& b : blocks)
    if (b->ffn->stats.aux_loss.defined()) total = total + b->ffn->stats.aux_loss;
  return total;
}

std::vector<FfnStats> LanguageModel::layer_stats() const {
  std::vector<FfnStats> out;
  for (const auto& b : blocks) out.push_back(b->ffn->stats);
  return out;
}

}  // namespace uoe::nn
