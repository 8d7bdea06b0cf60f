// uoe info: total and active parameters, FLOPs per token and a training-memory estimate, every FFN kind side by
// side, and the memory breakdown of the chosen configuration.
#include <cstdio>
#include <utility>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "nn/accounting.h"

namespace uoe::cli {
namespace {

double mib(double bytes) { return bytes / double(1 << 20); }

// The training settings the estimate is for, from the flags.
nn::MemoryOptions memory_options(const Args& a, const nn::ModelConfig& c) {
  nn::MemoryOptions o;
  o.batch = a.integer("batch");
  UOE_CHECK(o.batch >= 1, "--batch must be at least 1 (rows per process), got ", o.batch);
  o.seq = a.integer_or("seq", c.context);
  UOE_CHECK(o.seq >= 1 && o.seq <= c.context, "--seq must be in [1, context = ", c.context, "], got ", o.seq);
  o.compute = precision_flag(a, "dtype", "the compute dtype");
  o.storage = precision_flag(a, "param-dtype", "the parameters' and gradients' storage");
  o.checkpoint_activations = a.flag("checkpoint-activations");
  o.ranks = a.integer("ranks");
  UOE_CHECK(o.ranks >= 1, "--ranks must be at least 1 (processes of the run), got ", o.ranks);
  o.zero1 = a.flag("zero1");
  o.expert_parallel = a.integer("expert-parallel");
  UOE_CHECK(o.expert_parallel >= 1 && o.ranks % o.expert_parallel == 0, "--expert-parallel ", o.expert_parallel,
            " must divide --ranks ", o.ranks);
  o.grad_accum = a.integer("grad-accum");
  UOE_CHECK(o.grad_accum >= 1, "--grad-accum must be at least 1 (micro-batches per step), got ", o.grad_accum);
  return o;
}

// The `kind` member of `base`'s preset family (tiny-*, small-*, ...), else `base` with the FFN kind switched.
nn::ModelConfig sibling_config(const nn::ModelConfig& base, nn::FfnKind kind) {
  const size_t dash = base.name.rfind('-');
  nn::ModelConfig c = base;
  if (dash != std::string::npos) {
    try {
      c = nn::load_model_config(base.name.substr(0, dash + 1) + nn::ffn_kind_name(kind));
    } catch (const Error&) {
    }
  }
  c.ffn.kind = kind;
  nn::resolve_defaults(c);
  return c;
}

}  // namespace

int cmd_info(const Args& a) {
  nn::ModelConfig base = nn::load_model_config(a.required("config"));
  nn::resolve_defaults(base);
  const nn::MemoryOptions mem = memory_options(a, base);
  const nn::MemoryEstimate e = nn::estimate_training_memory(base, mem);  // bad settings fail before any output
  std::printf("%s: %ld layers, d_model %ld, %ld heads (%ld kv), context %ld, vocab %ld\n", base.name.c_str(),
              long(base.n_layers), long(base.d_model), long(base.n_heads), long(base.n_kv_heads), long(base.context),
              long(base.vocab_size));
  std::printf("train memory (tensor allocator peak): batch %ld x seq %ld per process, %s compute%s%s, AdamW",
              long(mem.batch), long(mem.seq),
              mem.compute == DType::BFloat16 ? "bf16" : "f32", mem.storage == DType::BFloat16 ? ", bf16 parameters" : "",
              mem.checkpoint_activations ? ", activation checkpointing" : "");
  if (mem.ranks > 1) std::printf(", %ld ranks%s", long(mem.ranks), mem.zero1 ? " (ZeRO-1)" : "");
  if (mem.expert_parallel > 1) std::printf(", experts split across %ld ranks", long(mem.expert_parallel));
  if (mem.grad_accum > 1) std::printf(", %ld micro-batches per step", long(mem.grad_accum));
  std::printf("\n\n");
  // a preset's own family (tiny-*, small-*), else the same file with the FFN kind switched
  const nn::FfnKind kinds[] = {nn::FfnKind::Dense, nn::FfnKind::MoE, nn::FfnKind::AoE, nn::FfnKind::UoE};
  std::vector<nn::ModelConfig> siblings;
  for (nn::FfnKind kind : kinds) siblings.push_back(sibling_config(base, kind));
  const double uoe_flops = nn::count_model(siblings.back()).flops;
  std::printf("%-8s %14s %14s %16s %9s %16s\n", "ffn", "total params", "active params", "FLOPs/token", "vs uoe",
              "train memory");
  for (const nn::ModelConfig& c : siblings) {
    const nn::ModelCounts k = nn::count_model(c);
    nn::MemoryOptions own = mem;  // a dense FFN has no experts to split
    if (c.ffn.kind == nn::FfnKind::Dense || c.ffn.n_experts % mem.expert_parallel != 0) own.expert_parallel = 1;
    std::printf("%-8s %13.2fM %13.2fM %15.2fM %+8.2f%% %12.0f MiB%s\n", nn::ffn_kind_name(c.ffn.kind), k.total / 1e6,
                k.active / 1e6, k.flops / 1e6, 100 * (k.flops / uoe_flops - 1),
                mib(nn::estimate_training_memory(c, own).total), c.ffn.kind == base.ffn.kind ? "  <- this config" : "");
  }
  std::printf("(FLOPs/token: forward, active weights and causal attention at full context; vs uoe: against the UoE "
              "of the same family)\n");
  std::printf("\n%s at the peak (during %s):\n", base.name.c_str(), e.phase.c_str());
  const std::pair<const char*, double> lines[] = {
      {"parameters", e.parameters},    {"gradients", e.gradients},         {"optimizer state", e.optimizer},
      {"gradient buckets", e.buckets}, {"activations", e.activations},    {"weight copies", e.weight_copies},
      {"transient", e.transient},      {"total", e.total}};
  for (const auto& [name, bytes] : lines) std::printf("  %-16s %10.1f MiB\n", name, mib(bytes));
  return 0;
}

}  // namespace uoe::cli
