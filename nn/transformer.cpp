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

FfnOut Block::forward(const Tensor& x, std::optional<DType> compute, KvLayer* cache, int64_t pos) {
  const int64_t B = x.size(0), T = x.size(1), d = x.size(2);
  // Norms and the residual stream in x's dtype; attention and the FFN in the compute dtype.
  auto in = [&](const Tensor& t) { return compute ? t.to(*compute) : t; };
  const Tensor h = x + attn->forward(in(attn_norm->forward(x)), cache, pos).to(x.dtype());  // [B, T, d]
  const FfnOut f = ffn->forward(in(ffn_norm->forward(h)).reshape({B * T, d}));             // y [B·T, d]
  return {h + f.y.view({B, T, d}).to(x.dtype()), f.aux};
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

LanguageModel::Output LanguageModel::run(const Tensor& ids, KvCache* cache) {
  UOE_CHECK(ids.dim() == 2 && ids.size(1) <= config.context, "[model] ids must be [B, T] with T <= context ",
            config.context, ", got ", shape_str(ids.shape()));
  UOE_CHECK(!cache || (!autograd::grad_enabled() && cache->layers.size() == blocks.size()),
            "[model] a cached forward is for inference (NoGradGuard) with a cache from new_cache()");
  const int64_t pos = cache ? cache->length : 0;
  // [B, T, d]: the residual stream in the parameters' dtype, but float32 when they are stored in bfloat16
  Tensor x = embed->forward(ids);
  if (is_reduced_float(x.dtype())) x = x.to(DType::Float32);
  Output out;
  for (size_t i = 0; i < blocks.size(); ++i) {
    FfnOut b;
    if (cache) b = blocks[i]->forward(x, compute_dtype, &cache->layers[i], pos);
    else b = checkpoint_activations ? checkpointed(*blocks[i], x) : blocks[i]->forward(x, compute_dtype);
    x = b.y;
    if (b.aux.defined()) out.aux.push_back(b.aux);
  }
  if (cache) cache->length += ids.size(1);
  x = final_norm->forward(x);
  if (compute_dtype) x = x.to(*compute_dtype);
  out.logits = head ? head->forward(x) : ops::matmul(x, embed->weight.to(x.dtype()).mT());  // [B, T, vocab]
  return out;
}

KvCache LanguageModel::new_cache() const {
  KvCache cache;
  cache.layers.assign(blocks.size(), KvLayer{Tensor(), Tensor(), config.context});
  return cache;
}

FfnOut LanguageModel::checkpointed(Block& block, const Tensor& x) const {
  // The block's output and its auxiliary loss (when it has one) leave the checkpoint together, so the loss's
  // gradient reaches the router through the recomputation too.
  const std::optional<DType> compute = compute_dtype;
  const std::vector<Tensor> out = checkpoint(
      [&block, compute](const Tensor& in) {
        const FfnOut o = block.forward(in, compute);
        if (!o.aux.defined()) return std::vector<Tensor>{o.y};
        return std::vector<Tensor>{o.y, o.aux.to(o.y.dtype())};
      },
      x);
  return {out[0], out.size() > 1 ? out[1] : Tensor()};
}

Tensor LanguageModel::loss(const Tensor& ids, const Tensor& targets) {
  const Output out = run(ids, nullptr);                // logits [B, T, vocab] in the compute dtype
  last_ce = ops::cross_entropy(out.logits, targets);  // float32 whatever the compute dtype
  Tensor total = last_ce;
  for (const Tensor& aux : out.aux) total = total + aux;
  return total;
}

std::vector<FfnStats> LanguageModel::layer_stats() const {
  std::vector<FfnStats> out;
  for (const auto& b : blocks) out.push_back(b->ffn->stats);
  return out;
}

}  // namespace uoe::nn
