// uoe info: total and active parameters, FLOPs per token and a training-memory estimate, every FFN kind side by side.
#include <cstdio>

#include "args.h"
#include "core/error.h"
#include "commands.h"
#include "nn/accounting.h"

namespace uoe::cli {
int cmd_info(const std::vector<std::string>& argv) {
  const Args a("info", argv, {"config"});
  const nn::ModelConfig base = nn::load_model_config(a.required("config"));
  std::printf("%s: %ld layers, d_model %ld, %ld heads (%ld kv), context %ld, vocab %ld\n\n", base.name.c_str(),
              long(base.n_layers), long(base.d_model), long(base.n_heads), long(base.n_kv_heads), long(base.context),
              long(base.vocab_size));
  std::printf("%-8s %14s %14s %16s %16s\n", "ffn", "total params", "active params", "FLOPs/token", "train memory");
  for (nn::FfnKind kind : {nn::FfnKind::Dense, nn::FfnKind::MoE, nn::FfnKind::AoE, nn::FfnKind::UoE}) {
    nn::ModelConfig c = base;
    // a preset's own family (tiny-*, small-*), else the same file with the FFN kind switched
    const size_t dash = base.name.rfind('-');
    const std::string sibling = dash == std::string::npos ? "" : base.name.substr(0, dash + 1) + nn::ffn_kind_name(kind);
    try {
      c = nn::load_model_config(sibling);
    } catch (const Error&) {
      c.ffn.kind = kind;
    }
    nn::resolve_defaults(c);
    const nn::ModelCounts k = nn::count_model(c);
    std::printf("%-8s %13.2fM %13.2fM %15.2fM %14.0f MiB%s\n", nn::ffn_kind_name(kind), k.total / 1e6, k.active / 1e6,
                k.flops / 1e6, k.memory / (1 << 20), kind == base.ffn.kind ? "  <- this config" : "");
  }
  return 0;
}

}  // namespace uoe::cli
