// Parameter, FLOP and memory accounting from a configuration.
#include "nn/accounting.h"

#include <utility>

namespace uoe::nn {
namespace {

// FFN parameters of one layer: all, and those one token uses.
std::pair<double, double> ffn_params(const ModelConfig& c) {
  const FfnConfig& f = c.ffn;
  const double d = double(c.d_model), n = double(f.n_experts), K = double(f.top_k), D = double(f.expert_width);
  switch (f.kind) {
    case FfnKind::Dense: return {3 * d * double(f.hidden), 3 * d * double(f.hidden)};
    case FfnKind::MoE: {
      const double shared = 3 * d * double(f.shared_width);
      return {d * n + n * 3 * d * D + shared, d * n + K * 3 * d * D + shared};
    }
    case FfnKind::AoE: {
      const double low = double(f.d_low);
      return {d * n * low + n * (low * D + 2 * d * D), d * n * low + K * (low * D + 2 * d * D)};
    }
    case FfnKind::UoE: {
      const double r = double(f.routing_neurons);
      return {n * 3 * d * D, 3 * d * n * r + K * 3 * d * (D - r)};
    }
  }
  return {0, 0};
}

}  // namespace

ModelCounts count_model(const ModelConfig& c) {
  const double d = double(c.d_model), L = double(c.n_layers), V = double(c.vocab_size), T = double(c.context);
  const double dh = d / double(c.n_heads), kv = double(c.n_kv_heads) * dh;
  const double attn = 2 * d * d + 2 * d * kv, norms = 2 * d;
  const auto [ffn_total, ffn_active] = ffn_params(c);
  const double embed = V * d, head = c.tied_embeddings ? 0 : V * d;
  ModelCounts k;
  k.total = embed + head + L * (attn + norms + ffn_total) + d;
  k.active = embed + head + L * (attn + norms + ffn_active) + d;
  // 2 FLOPs per active weight (embedding lookups excluded, the output head included) plus causal attention
  k.flops = 2 * (L * (attn + ffn_active) + V * d) + L * 2 * T * d;
  // weights, grads, AdamW m and v in float32 + activations kept for backward (about 16 d + 6 of the
  // active FFN width per token and layer, float32) at batch 16
  const double active_width = ffn_active / (3 * d);
  k.memory = 16 * k.total + 4 * 16 * T * L * (16 * d + 6 * active_width) + 4 * 16 * T * V * 2;
  return k;
}

}  // namespace uoe::nn
