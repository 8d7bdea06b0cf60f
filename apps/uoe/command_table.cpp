// Every command of the uoe program with its flags: name, type, default and meaning, declared once here. CLI11
// parses them (main.cpp) and prints them as each command's help. Training defaults are read from TrainOptions{}
// and the analysis defaults from AnalysisOptions{}, never retyped.
#include "commands.h"

#include <map>
#include <optional>
#include <string>

#include "analysis/routing_analysis.h"
#include "core/collective_watchdog.h"
#include "nn/trainer.h"

namespace uoe::cli {
namespace {

using F = FlagType;

std::string integer_text(int64_t v) { return std::to_string(v); }

// Flags that several commands share, with the same meaning everywhere.
Flag threads_flag(int64_t def = 0) {
  return {"threads", F::Integer, integer_text(def),
          "OpenMP threads (0: OMP_NUM_THREADS if set, else the cores idle at start)"};
}
Flag device_flag_spec() { return {"device", F::Text, "cpu", "where the model runs: cpu, cuda or cuda:N"}; }
Flag dtype_flag(const std::string& meaning) { return {"dtype", F::Text, "f32", meaning + ": f32 or bf16"}; }
Flag param_dtype_flag() {
  return {"param-dtype", F::Text, "f32", "storage of parameters and gradients: f32 or bf16 (optimiser state stays f32)"};
}
Flag memory_check_flag() {
  return {"skip-memory-check", F::Switch, "", "start even when the memory estimate exceeds what the process may use"};
}
Flag ckpt_flag() { return {"ckpt", F::Text, "", "checkpoint directory (<train --out>/checkpoint)", true}; }
Flag data_flag(const std::string& meaning) { return {"data", F::Text, "", meaning, true}; }
Flag seq_flag(const std::string& def = "") {
  return {"seq", F::Integer, def, "tokens per window" + std::string(def.empty() ? " (default: the model's context)" : "")};
}
Flag config_flag(const std::string& def) {
  return {"config", F::Text, def, "a preset (tiny-uoe, small-moe, 1b-aoe, 3b-dense, ...) or a model .json file",
          def.empty()};
}

Flag set_flag() {
  return {"set", F::Repeated, "", "field=value: a field of the model's config.json changed (ffn.<field> for the "
          "FFN's), checked as config.json is; repeat for several (e.g. --set ffn.routing_neurons=32 --set "
          "ffn.combine=full_expert)"};
}

std::vector<Flag> train_flags() {
  const nn::TrainOptions d;
  return {
      config_flag("tiny-uoe"),
      set_flag(),
      data_flag("training text (or a token file from uoe prepare); its tail is the validation split"),
      {"out", F::Text, "", "run directory: metrics.jsonl, checkpoint/, tokens.bin", true},
      {"steps", F::Integer, integer_text(d.steps), "optimiser steps (the cosine schedule spans them)"},
      {"batch", F::Integer, integer_text(d.batch), "windows per micro-batch (all ranks together)"},
      seq_flag(),
      {"lr", F::Number, number_text(d.lr), "peak learning rate"},
      {"min-lr", F::Number, number_text(d.min_lr), "final learning rate of the cosine schedule (negative: --lr / 10)"},
      {"warmup", F::Integer, integer_text(d.warmup), "linear warmup steps (negative: min(100, --steps / 10))"},
      {"weight-decay", F::Number, number_text(d.weight_decay), "decoupled weight decay"},
      {"clip", F::Number, number_text(d.clip), "global gradient-norm limit (0: no clipping)"},
      {"grad-accum", F::Integer, integer_text(d.grad_accum), "micro-batches per optimiser step"},
      {"optimizer", F::Text, d.optimizer, "adamw or sgd"},
      threads_flag(),
      {"seed", F::Integer, integer_text(int64_t(d.seed)), "seed of the weights and of the batches drawn"},
      {"resume", F::Switch, "", "continue the run in --out from its checkpoint"},
      {"overwrite", F::Switch, "", "start afresh, replacing the run in --out"},
      {"eval-every", F::Integer, integer_text(d.eval_every), "steps between validations (0: only at the end)"},
      {"eval-batches", F::Integer, integer_text(d.eval_batches), "validation batches per evaluation"},
      {"save-every", F::Integer, integer_text(d.save_every), "steps between checkpoints (0: only at the end)"},
      {"keep-checkpoints", F::Integer, integer_text(d.keep_checkpoints), "also keep the last N saves as "
       "<out>/checkpoint-<step> (0: only the latest, <out>/checkpoint)"},
      {"routing-probe-tokens", F::Integer, "512", "validation tokens whose routing agreement, load entropy and "
       "gradient paths are logged at each evaluation (0: none)"},
      {"no-save", F::Switch, "", "no checkpoint at the end (throughput runs)"},
      {"tokenizer", F::Text, "byte", "byte, bpe:<vocab size> (learnt from --data) or a tokenizer .json file"},
      {"minutes", F::Number, number_text(d.time_limit_s / 60), "wall-clock limit; the run stops at --steps or here "
       "(0: no limit)"},
      {"quiet", F::Switch, "", "no progress bar"},
      device_flag_spec(),
      dtype_flag("compute precision (bf16: over float32 master weights)"),
      param_dtype_flag(),
      {"checkpoint-activations", F::Switch, "", "recompute each block in backward instead of keeping activations"},
      {"zero1", F::Switch, "", "under mpirun: shard the optimiser state across ranks (ZeRO-1)"},
      {"expert-parallel", F::Integer, integer_text(d.expert_parallel), "under mpirun: ranks per group that split "
       "every layer's experts"},
      {"collective-timeout", F::Number, number_text(watchdog::timeout()), "seconds a collective may wait before the "
       "run ends (0: never)"},
      {"init-from", F::Text, "", "fine-tune: start from this checkpoint's model, tokenizer and weights, at step 0"},
      {"allow-change", F::Text, "", "with --resume: comma-separated settings that may differ from the run's "
       "(e.g. steps,lr; the run is then not bit-exact)"},
      memory_check_flag(),
  };
}

std::vector<Flag> eval_flags() {
  return {ckpt_flag(),
          data_flag("text (or token file) whose validation split is scored"),
          {"batch", F::Integer, "8", "windows per batch"},
          seq_flag(),
          {"max-batches", F::Integer, "", "validation batches scored (default: all)"},
          {"json", F::Switch, "", "print the result as one JSON object, numbers at full precision"},
          threads_flag(),
          device_flag_spec(),
          dtype_flag("compute precision"),
          memory_check_flag()};
}

std::vector<Flag> sample_flags() {
  return {ckpt_flag(),
          {"prompt", F::Text, "", "text the generation continues (default: a newline)"},
          {"tokens", F::Integer, "200", "tokens generated"},
          {"temperature", F::Number, "1", "softmax temperature (0: greedy)"},
          {"top-k", F::Integer, "0", "draw among the k most probable tokens (0: every token)"},
          {"top-p", F::Number, "1", "draw among the most probable tokens up to this probability mass (1: every token)"},
          {"seed", F::Integer, "0", "seed of the draws"},
          threads_flag(),
          device_flag_spec(),
          dtype_flag("compute precision"),
          memory_check_flag()};
}

std::vector<Flag> info_flags() {
  const nn::TrainOptions d;
  return {config_flag(""),
          {"batch", F::Integer, integer_text(d.batch), "windows per micro-batch and process"},
          seq_flag(),
          dtype_flag("compute precision"),
          param_dtype_flag(),
          {"checkpoint-activations", F::Switch, "", "estimate with activation checkpointing"},
          {"ranks", F::Integer, "1", "processes of the run"},
          {"zero1", F::Switch, "", "optimiser state sharded across --ranks (ZeRO-1)"},
          {"expert-parallel", F::Integer, integer_text(d.expert_parallel), "ranks per group that split the experts"},
          {"grad-accum", F::Integer, integer_text(d.grad_accum), "micro-batches per optimiser step"}};
}

std::vector<Flag> prepare_flags() {
  return {data_flag("text file to tokenise"),
          {"out", F::Text, "", "token file written (uoe train and eval read it as --data)", true},
          {"tokenizer", F::Text, "byte", "byte, bpe:<vocab size> (learnt from --data) or a tokenizer .json file"},
          {"tokenizer-out", F::Text, "", "save the tokenizer here (required with bpe:<vocab size>)"}};
}

std::vector<Flag> compare_flags() {
  const nn::TrainOptions d;
  return {data_flag("training text (or byte-level token file)"),
          {"out", F::Text, "", "directory of results.md, val_loss.svg and every run", true},
          {"archs", F::Text, "dense,moe,aoe,uoe", "what is compared, comma-separated: each entry trains "
           "<prefix><entry> (FFN kinds of the preset family; with --preset-prefix '' presets or config files)"},
          {"preset-prefix", F::Text, "tiny-", "preset family: each kind trains <prefix><kind>"},
          {"variant", F::Repeated, "", "label:field=value,...: every --archs entry also trains with these config "
           "fields changed, as label '<entry>-<label>'; repeat for several; the first variant is the reference of "
           "the paired differences (e.g. --variant base: --variant r32:ffn.routing_neurons=32)"},
          {"set", F::Repeated, "", "field=value changed in every variant's config.json, as uoe train --set"},
          {"balance-loss", F::Number, "0.01", "load-balance loss weight α of every MoE and AoE variant (0: none; "
           "a --set or --variant of ffn.aux_loss wins)"},
          {"minutes", F::Number, "10", "wall-clock budget of each run"},
          {"seeds", F::Integer, "2", "runs per kind (seeds 0 to N-1)"},
          {"steps", F::Integer, integer_text(d.steps), "most steps of each run (the cosine schedule spans them)"},
          {"batch", F::Integer, integer_text(d.batch), "windows per batch"},
          seq_flag("256"),
          {"lr", F::Number, number_text(d.lr), "peak learning rate"},
          {"eval-every", F::Integer, "25", "steps between validations (each run also evaluates at its end)"},
          {"eval-batches", F::Integer, integer_text(d.eval_batches), "validation batches per evaluation"},
          threads_flag(2),
          {"jobs", F::Integer, "1", "runs at a time, each with --threads / --jobs threads"},
          {"overwrite", F::Switch, "", "run again in an --out that holds a comparison"}};
}

std::vector<Flag> plot_flags() {
  return {{"run", F::Text, "", "run directory (the --out of uoe train)", true},
          {"out", F::Text, "", "directory of the charts (default: <run>/plots)"}};
}

std::vector<Flag> analyze_flags() {
  const analysis::AnalysisOptions d;
  return {{"ckpt", F::Text, "", "checkpoint directory (<train --out>/checkpoint); required unless --runs"},
          data_flag("text (or token file) whose validation split is analysed"),
          {"out", F::Text, "", "directory of report.html, stats.json and the CSV files", true},
          {"compare", F::Text, "", "a second checkpoint (another run, or another step of the same one) analysed the "
           "same way: --out gets a side-by-side report.html and compare.csv, and each full report in a/ and b/"},
          {"runs", F::Text, "", "a uoe compare folder: every <run>/checkpoint in it (dense ones left out) analysed, "
           "one combined report.html and compare.csv in --out, each run's full report in <out>/<run>/"},
          {"tokens", F::Integer, integer_text(d.tokens), "tokens run through the model (at most the whole file "
           "unless given)"},
          {"seq", F::Integer, integer_text(d.seq), "tokens per window (0: the model's context)"},
          {"batch", F::Integer, integer_text(d.batch), "windows per forward"},
          {"samples", F::Integer, integer_text(d.activation_tokens), "tokens sampled for score vs full activation, the "
           "routing-neuron statistics and the neuron scan"},
          {"grad-windows", F::Integer, integer_text(d.gradient_windows), "windows whose gradient paths are measured"},
          {"examples", F::Integer, integer_text(d.example_tokens), "tokens shown coloured by their top expert"},
          {"bins", F::Integer, integer_text(d.bins), "histogram bins"},
          threads_flag(),
          memory_check_flag()};
}

std::vector<Flag> graph_flags() {
  return {config_flag(""),
          {"layer", F::Integer, "0", "the block drawn"},
          {"out", F::Text, "graph.dot", "DOT file written, or a folder (an existing one, or ending in /) that gets "
           "graph.dot; the folder is created and the SVG goes beside the DOT"},
          seq_flag("8")};
}

}  // namespace

std::optional<std::string> flag_of_option(const std::string& field) {
  static const std::map<std::string, std::string> flags = {
      {"TrainOptions::steps", "--steps"},
      {"TrainOptions::batch", "--batch"},
      {"TrainOptions::seq", "--seq"},
      {"TrainOptions::grad_accum", "--grad-accum"},
      {"TrainOptions::lr", "--lr"},
      {"TrainOptions::min_lr", "--min-lr"},
      {"TrainOptions::warmup", "--warmup"},
      {"TrainOptions::weight_decay", "--weight-decay"},
      {"TrainOptions::clip", "--clip"},
      {"TrainOptions::optimizer", "--optimizer"},
      {"TrainOptions::seed", "--seed"},
      {"TrainOptions::compute_dtype", "--dtype"},
      {"TrainOptions::param_dtype", "--param-dtype"},
      {"TrainOptions::zero1", "--zero1"},
      {"TrainOptions::expert_parallel", "--expert-parallel"},
      {"TrainOptions::device", "--device"},
      {"TrainOptions::data_file", "--data"},
      {"TrainOptions::out_dir", "--out"},
      {"TrainOptions::out_dir emptied", "uoe train --overwrite"},
      {"TrainOptions::resume", "--resume"},
      {"TrainOptions::init_from", "--init-from"},
      {"TrainOptions::allow_change", "--allow-change"},
      {"TrainOptions::memory_check = false", "--skip-memory-check"},
      {"InferenceOptions::batch", "--batch"},
      {"AnalysisOptions::seq", "--seq"},
      {"AnalysisOptions::tokens", "--tokens"},
      {"AnalysisOptions::batch", "--batch"},
      {"AnalysisOptions::gradient_windows", "--grad-windows"},
      {"AnalysisOptions::activation_tokens", "--samples"},
  };
  const auto it = flags.find(field);
  return it == flags.end() ? std::nullopt : std::optional(it->second);
}

const std::vector<Command>& commands() {
  static const std::vector<Command> all = {
      {"train", "train a model from a text file, with checkpoints; under mpirun, data (and expert) parallel",
       "uoe train --config tiny-uoe --data text.txt --out runs/a --steps 600 --minutes 10", train_flags(),
       cmd_train},
      {"eval", "validation loss of a checkpoint in nats per token and bits per byte",
       "uoe eval --ckpt runs/a/checkpoint --data text.txt", eval_flags(), cmd_eval},
      {"sample", "generate text from a checkpoint (temperature, top-k, top-p; seeded)",
       "uoe sample --ckpt runs/a/checkpoint --prompt \"ROMEO:\" --tokens 200 --temperature 0.8 --top-k 40",
       sample_flags(), cmd_sample},
      {"info", "parameters, FLOPs per token and training memory of a model, every FFN kind side by side",
       "uoe info --config tiny-uoe --batch 16 --dtype bf16", info_flags(), cmd_info},
      {"prepare", "tokenise a text file into a token file (and save its tokenizer)",
       "uoe prepare --data text.txt --tokenizer bpe:1024 --tokenizer-out tok.json --out tokens.bin", prepare_flags(),
       cmd_prepare},
      {"compare", "train FFN kinds, configs or --variant ablations for the same time on the same seeds and compare "
       "their validation loss",
       "uoe compare --data text.txt --archs dense,moe,aoe,uoe --minutes 10 --seeds 2 --out runs/compare",
       compare_flags(), cmd_compare},
      {"plot", "charts of a run's metrics.jsonl: <run>/plots/*.svg and index.html", "uoe plot --run runs/a",
       plot_flags(), cmd_plot},
      {"analyze", "routing and neuron analysis of a checkpoint (or several side by side): report.html, stats.json, CSV",
       "uoe analyze --ckpt runs/a/checkpoint --data text.txt --out runs/a/analysis", analyze_flags(), cmd_analyze},
      {"graph", "the autograd graph of one Transformer block as DOT (and SVG with Graphviz)",
       "uoe graph --config tiny-uoe --layer 0 --out runs/graph/block.dot", graph_flags(), cmd_graph},
  };
  return all;
}

}  // namespace uoe::cli
