// Causal self-attention: project, rotate (RoPE), fused attention, project back.
#include "nn/attention.h"

#include <cmath>

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

Tensor CausalSelfAttention::forward(const Tensor& x, KvLayer* cache, int64_t pos) const {
  const int64_t B = x.size(0), T = x.size(1);
  const Tensor q = ops::rope(wq->forward(x).view({B, T, heads, head_dim}), rope_base, pos);      // [B, T, H, Dh]
  const Tensor k = ops::rope(wk->forward(x).view({B, T, kv_heads, head_dim}), rope_base, pos);   // [B, T, Hkv, Dh]
  const Tensor v = wv->forward(x).view({B, T, kv_heads, head_dim});                              // [B, T, Hkv, Dh]
  if (cache) {
    UOE_CHECK(pos == 0 || T == 1, "[attention] a cached forward takes the prompt at position 0 or one token, got ",
              T, " tokens at position ", pos);
    UOE_CHECK(pos + T <= cache->capacity, "[attention] the cache holds ", cache->capacity, " positions, asked for ",
              pos + T);
    if (!cache->k.defined()) {
      const TensorOptions like_k = TensorOptions{}.with_dtype(k.dtype()).with_device(k.device());
      cache->k = zeros({B, cache->capacity, kv_heads, head_dim}, like_k);
      cache->v = zeros_like(cache->k);
    }
    cache->k.narrow(1, pos, T).copy_(k);
    cache->v.narrow(1, pos, T).copy_(v);
    if (T == 1 && pos > 0) {  // one query against every cached key: composed ops, G = H / Hkv queries per kv head
      const int64_t L = pos + 1, G = heads / kv_heads;
      const Tensor keys = cache->k.narrow(1, 0, L), values = cache->v.narrow(1, 0, L);             // [B, L, Hkv, Dh]
      const Tensor qg = q.view({B, kv_heads, G, head_dim});                                       // [B, Hkv, G, Dh]
      const Tensor s = ops::matmul(qg, keys.permute({0, 2, 3, 1})) * (1.0 / std::sqrt(double(head_dim)));
      const Tensor o = ops::matmul(ops::softmax(s, -1), values.transpose(1, 2));                  // [B, Hkv, G, Dh]
      return wo->forward(o.reshape({B, 1, heads * head_dim}));                                    // [B, 1, d]
    }
  }
  // The kernel takes [B, H, T, Dh] views of the [B, T, H, Dh] buffers: no copies.
  const Tensor o = ops::scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), true);
  return wo->forward(o.transpose(1, 2).reshape({B, T, heads * head_dim}));                // [B, T, d]
}

}  // namespace uoe::nn
