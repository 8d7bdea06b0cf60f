// uoe info: total and active parameters, FLOPs per token and a training-memory estimate, every FFN kind side by side.
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "nn/config.h"

namespace uoe::cli {
namespace {

struct Counts {
  double total = 0, active = 0;  // parameters
  double flops = 0;              // forward FLOPs per token at full context
  double memory = 0;             // bytes to train with AdamW at batch 16 x context
};

// FFN parameters of one layer: all, and those one token uses.
std::pair<double, double> ffn_params(const nn::ModelConfig& c) {
  const nn::FfnConfig& f = c.ffn;
  const double d = double(c.d_model), n = double(f.n_experts), K = double(f.top_k), D = double(f.expert_width);
  switch (f.kind) {
    case nn::FfnKind::Dense: return {3 * d * double(f.hidden), 3 * d * double(f.hidden)};
    case nn::FfnKind::MoE: {
      const double shared = 3 * d * double(f.shared_width);
      return {d * n + n * 3 * d * D + shared, d * n + K * 3 * d * D + shared};
    }
    case nn::FfnKind::AoE: {
      const double low = double(f.d_low);
      return {d * n * low + n * (low * D + 2 * d * D), d * n * low + K * (low * D + 2 * d * D)};
    }
    case nn::FfnKind::UoE: {
      const double r = double(f.routing_neurons);
      return {n * 3 * d * D, 3 * d * n * r + K * 3 * d * (D - r)};
    }
  }
  return {0, 0};
}

Counts count(const nn::ModelConfig& c) {
  const double d = double(c.d_model), L = double(c.n_layers), V = double(c.vocab_size), T = double(c.context);
  const double dh = d / double(c.n_heads), kv = double(c.n_kv_heads) * dh;
  const double attn = 2 * d * d + 2 * d * kv, norms = 2 * d;
  const auto [ffn_total, ffn_active] = ffn_params(c);
  const double embed = V * d, head = c.tied_embeddings ? 0 : V * d;
  Counts k;
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

}  // namespace

int cmd_info(const std::vector<std::string>& argv) {
  const Args a("info", argv, {"config"});
  const nn::ModelConfig base = nn::load_model_config(a.required("config"));
  std::printf("%s: %ld layers, d_model %ld, %ld heads (%ld kv), context %ld, vocab %ld\n\n", base.name.c_str(),
              long(base.n_layers), long(base.d_model), long(base.n_heads), long(base.n_kv_heads), long(base.context),
              long(base.vocab_size));
  std::printf("%-8s %14s %14s %16s %16s\n", "ffn", "total params", "active params", "FLOPs/token", "train memory");
  for (nn::FfnKind kind : {nn::FfnKind::Dense, nn::FfnKind::MoE, nn::FfnKind::AoE, nn::FfnKind::UoE}) {
    nn::ModelConfig c = base;
    const std::string family = base.name.rfind("tiny-", 0) == 0 ? "tiny-" + std::string(nn::ffn_kind_name(kind)) : "";
    if (!family.empty()) c = nn::load_model_config(family);
    else c.ffn.kind = kind;
    nn::resolve_defaults(c);
    const Counts k = count(c);
    std::printf("%-8s %13.2fM %13.2fM %15.2fM %14.0f MiB%s\n", nn::ffn_kind_name(kind), k.total / 1e6, k.active / 1e6,
                k.flops / 1e6, k.memory / (1 << 20), kind == base.ffn.kind ? "  <- this config" : "");
  }
  return 0;
}

}  // namespace uoe::cli
