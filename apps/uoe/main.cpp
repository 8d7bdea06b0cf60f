// uoe: train, evaluate, sample from and inspect Mixture-of-Experts language models.
#include <cstdio>
#include <cstring>
#include <new>
#include <string>
#include <vector>

#include "commands.h"

namespace {

const char* kUsage =
    "usage: uoe <command> [flags]\n"
    "  train   --config <preset|file.json> --data <text> --out <dir> [--steps N] [--batch B] [--seq T] [--lr X]\n"
    "          [--min-lr X] [--warmup N] [--weight-decay W] [--clip C] [--grad-accum N] [--optimizer adamw|sgd]\n"
    "          [--threads N] [--seed S] [--resume | --overwrite] [--eval-every N] [--eval-batches N]\n"
    "          [--save-every N] [--no-save] [--tokenizer byte|bpe:V|file.json] [--minutes M] [--quiet]\n"
    "          [--device cpu|cuda|cuda:N] [--dtype f32|bf16] [--param-dtype f32|bf16] [--checkpoint-activations]\n"
    "          [--zero1] [--expert-parallel E] [--collective-timeout S]   (mpirun -np N uoe train ...: data (and\n"
    "          expert) parallel; a collective waiting S seconds (default 1800, 0: never) ends the run)\n"
    "          [--init-from <ckpt dir>]   (fine-tune: that checkpoint's model, tokenizer and weights; step 0)\n"
    "          [--allow-change steps,lr,...]   (--resume: settings that may differ from the run's; not bit-exact)\n"
    "          [--skip-memory-check]   (start even when the memory estimate exceeds what the process may use)\n"
    "  eval    --ckpt <dir> --data <text> [--batch B] [--seq T] [--max-batches N] [--threads N]\n"
    "          [--device cpu|cuda|cuda:N] [--dtype f32|bf16] [--skip-memory-check]\n"
    "  sample  --ckpt <dir> --prompt \"...\" [--tokens N] [--temperature T] [--top-k K] [--top-p P] [--seed S]\n"
    "          [--threads N] [--device cpu|cuda|cuda:N] [--dtype f32|bf16] [--skip-memory-check]\n"
    "  info    --config <preset|file.json> [--batch B] [--seq T] [--dtype f32|bf16] [--param-dtype f32|bf16]\n"
    "          [--checkpoint-activations] [--ranks N] [--zero1] [--expert-parallel E] [--grad-accum N]\n"
    "          (the tensor allocator's peak per process)\n"
    "  prepare --data <text> --out <tokens.bin> [--tokenizer byte|bpe:V|file.json] [--tokenizer-out tok.json]\n"
    "  compare --data <text> --out <dir> [--archs dense,moe,aoe,uoe] [--minutes M] [--seeds S] [--steps N]\n"
    "          [--batch B] [--seq T] [--lr X] [--eval-every N] [--eval-batches N] [--threads N] [--jobs J]\n"
    "          [--preset-prefix tiny-] [--overwrite]   (runs --jobs at a time, --threads / --jobs threads each)\n"
    "  plot    --run <dir> [--out <dir>]      (charts of metrics.jsonl: <run>/plots/*.svg and index.html)\n"
    "  analyze --ckpt <dir> --data <text> --out <dir> [--tokens N] [--seq T] [--batch B] [--samples N]\n"
    "          [--grad-windows N] [--examples N] [--bins N] [--threads N] [--skip-memory-check]\n"
    "          (report.html, stats.json, CSV)\n"
    "  graph   --config <preset|file.json> [--layer L] [--out graph.dot] [--seq T]\n"
    "Every command: one error naming the flag for a bad value; an unknown flag lists the command's flags.\n"
    "presets: <family>-<kind>, families tiny (a laptop CPU), small (~124M active), 1b, 3b; kinds uoe, moe, aoe,\n"
    "         dense (e.g. tiny-uoe, small-moe, 3b-uoe); `uoe info --config <preset>` prints sizes and memory\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h")) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log or pipe in order with stderr's errors
  const std::string cmd = argv[1];
  const std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (cmd == "train") return uoe::cli::cmd_train(rest);
    if (cmd == "eval") return uoe::cli::cmd_eval(rest);
    if (cmd == "sample") return uoe::cli::cmd_sample(rest);
    if (cmd == "info") return uoe::cli::cmd_info(rest);
    if (cmd == "compare") return uoe::cli::cmd_compare(rest);
    if (cmd == "plot") return uoe::cli::cmd_plot(rest);
    if (cmd == "prepare") return uoe::cli::cmd_prepare(rest);
    if (cmd == "graph") return uoe::cli::cmd_graph(rest);
    if (cmd == "analyze") return uoe::cli::cmd_analyze(rest);
    std::fprintf(stderr, "uoe: unknown command '%s'\n%s", cmd.c_str(), kUsage);
    return 2;
  } catch (const std::bad_alloc&) {  // an allocation outside the tensor allocator (which names its sizes)
    std::fprintf(stderr, "uoe %s: out of memory (std::bad_alloc): the sizes asked for need more memory than this "
                 "machine has; `uoe info --config <preset|file.json> --batch B --seq T` estimates what training needs\n",
                 cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uoe %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
