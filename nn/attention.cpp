// Causal self-attention: project, rotate (RoPE), fused attention, project back.
#include "nn/attention.h"

#include "core/error.h"
#include "ops/ops.h"

namespace uoe::nn {

CausalSelfAttention::CausalSelfAttention(int64_t d, int64_t h, int64_t kvh, double base, double out_std)
    : heads(h), kv_heads(kvh), head_dim(d / h), rope_base(base) {
  UOE_CHECK(h > 0 && d % h == 0 && kvh > 0 && h % kvh == 0, "[attention] d_model ", d, " must be divisible by heads ",
            h, ", and heads by kv_heads ", kvh);
  wq = register_module("wq", std::make_shared<Linear>(d, d));
  wk = register_module("wk", std::make_shared<Linear>(d, kvh * head_dim));
  wv = register_module("wv", std::make_shared<Linear>(d, kvh * head_dim));
  wo = register_module("wo", std::make_shared<Linear>(d, d, false, out_std));
}

Tensor CausalSelfAttention::forward(const Tensor& x) const {
  const int64_t B = x.size(0), T = x.size(1);
  const Tensor q = ops::rope(wq->forward(x).view({B, T, heads, head_dim}), rope_base);      // [B, T, H, Dh]
  const Tensor k = ops::rope(wk->forward(x).view({B, T, kv_heads, head_dim}), rope_base);   // [B, T, Hkv, Dh]
  const Tensor v = wv->forward(x).view({B, T, kv_heads, head_dim});                         // [B, T, Hkv, Dh]
  // The kernel takes [B, H, T, Dh] views of the [B, T, H, Dh] buffers: no copies.
  const Tensor o = ops::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), true);
  return wo->forward(o.transpose(1, 2).reshape({B, T, heads * head_dim}));                // [B, T, d]
}

}  // namespace uoe::nn
