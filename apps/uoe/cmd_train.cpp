// uoe train: one command from a text file to a trained, checkpointed model; under mpirun, data parallel.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "analysis/routing_probe.h"
#include "commands.h"
#include "core/collective_watchdog.h"
#include "core/communicator.h"
#include "core/error.h"
#include "core/json.h"
#include "cuda/cuda_api.h"
#include "nn/accounting.h"
#include "nn/checkpoint.h"
#include "nn/checkpoint_history.h"
#include "nn/run_identity.h"
#include "nn/trainer.h"
#include "nn/trainer_state.h"

namespace uoe::cli {
namespace {

// The step of the run whose checkpoint is `ckpt`, once every file a resume reads is known to be there and its
// trainer state valid; else one error saying what is damaged and how to recover.
int64_t checked_run_step(const std::string& ckpt) {
  nn::check_checkpoint(ckpt, nn::OptimizerState::Require);
  return nn::read_trainer_state(ckpt).step;
}

// "a checkpoint at step N", or what is wrong with a checkpoint that cannot be read.
std::string checkpoint_summary(const std::string& ckpt) {
  try {
    return "a checkpoint at step " + std::to_string(checked_run_step(ckpt));
  } catch (const Error& e) {
    return std::string("a checkpoint that cannot be read whole: ") + e.what();
  }
}

// --device: with several ranks a bare "cuda" means one GPU per rank of this node (local rank modulo GPU count).
// The chosen GPU becomes the process's current device, so that nothing of this rank lands on GPU 0 by default.
Device train_device(const Args& a, const Communicator& comm) {
  Device d = device_flag(a);
  if (a.str("device") == "cuda" && comm.size() > 1) d = Device::cuda(comm.local_rank() % cuda::device_count());
  if (d.is_cuda()) cuda::set_device(d.index);
  return d;
}

// What to try once a run has its checkpoint, and where the guide is.
void print_next_commands(const std::string& out, const std::string& data, bool interrupted) {
  if (interrupted) {
    std::printf("next: continue it with the same command and --resume\n");
    return;
  }
  std::printf("next:\n"
              "  uoe sample  --ckpt %s/checkpoint --prompt \"ROMEO:\" --tokens 200   # text from the model\n"
              "  uoe plot    --run %s                                 # training curves (plots/index.html)\n"
              "  uoe analyze --ckpt %s/checkpoint --data %s --out %s/analysis   # routing report\n"
              "  docs/GUIDE.md walks through each command; uoe help lists every flag\n",
              out.c_str(), out.c_str(), out.c_str(), data.c_str(), out.c_str());
}

int train_command(const Args& a, Communicator& comm) {
  const bool lead = comm.rank() == 0;
  set_threads(a.integer("threads"));
  nn::TrainOptions o;
  o.out_dir = a.required("out");
  o.resume = a.flag("resume");
  UOE_CHECK(!(o.resume && a.flag("overwrite")), "--resume continues the run in ", o.out_dir, ", --overwrite replaces "
            "it: give one of them");
  const std::string ckpt = o.out_dir + "/checkpoint";
  o.init_from = a.str("init-from");
  // Rank 0 alone finishes an interrupted checkpoint write (checkpoint_exists recovers it), of this run's and of the
  // --init-from checkpoint; the others look once it has, so that no two ranks race to rename one (which fails
  // where the shared file system has no flock).
  if (lead) {
    if (o.resume) nn::checkpoint_exists(ckpt);
    if (!o.init_from.empty()) nn::checkpoint_exists(o.init_from);
  }
  comm.barrier();  // on every rank, whatever its flags: the barriers stay paired until the run identity is checked
  const bool resuming = o.resume && nn::checkpoint_exists(ckpt);
  // A checkpoint that cannot be read whole stops the resume here, before its run is touched.
  const int64_t resumed_step = resuming ? checked_run_step(ckpt) : 0;
  if (!o.init_from.empty()) {
    UOE_CHECK(!a.has("config") && !a.has("tokenizer"), "--init-from ", o.init_from, " brings its model and tokenizer: "
              "leave out --config and --tokenizer");
    UOE_CHECK(nn::checkpoint_exists(o.init_from), "--init-from ", o.init_from, ": no checkpoint there (expected "
              "model.safetensors, config.json and tokenizer.json, as uoe train writes in <out>/checkpoint)");
  }
  // A resumed run keeps its own model configuration (a --config given as well must describe the same model, as
  // nn::train checks), a fine-tuning run takes its checkpoint's.
  nn::ModelConfig config = resuming && !a.has("config") ? nn::checkpoint_config(ckpt)
                           : !resuming && !o.init_from.empty() ? nn::checkpoint_config(o.init_from)
                                                               : nn::load_model_config(a.str("config"));
  if (resuming) config.name = nn::checkpoint_config(ckpt).name;
  // --set: config.json's fields changed one by one (e.g. ffn.routing_neurons=32), checked as config.json is
  const std::vector<std::string> sets = a.list("set");
  UOE_CHECK(o.init_from.empty() || sets.empty(), "--init-from ", o.init_from, " brings its model: leave out --set");
  if (!sets.empty()) config = nn::with_assignments(config, sets, "--set");
  o.steps = a.integer("steps");
  o.batch = a.integer("batch");
  o.seq = a.integer_or("seq", config.context);
  o.lr = a.number("lr");
  o.min_lr = a.number("min-lr");
  o.warmup = a.integer("warmup");
  o.seed = uint64_t(a.integer("seed"));
  o.eval_every = a.integer("eval-every");
  o.eval_batches = a.integer("eval-batches");
  o.save_every = a.integer("save-every");
  o.keep_checkpoints = a.integer("keep-checkpoints");
  o.save_at_end = !a.flag("no-save");
  o.grad_accum = a.integer("grad-accum");
  o.optimizer = a.str("optimizer");
  o.time_limit_s = a.number("minutes") * 60;
  o.clip = a.number("clip");
  o.weight_decay = a.number("weight-decay");
  o.progress = !a.flag("quiet");
  o.zero1 = a.flag("zero1");
  o.checkpoint_activations = a.flag("checkpoint-activations");
  o.expert_parallel = a.integer("expert-parallel");
  o.allow_change = nn::parse_allowed_changes(a.str("allow-change"));
  o.memory_check = !a.flag("skip-memory-check");
  watchdog::set_timeout(a.number("collective-timeout"));
  o.device = train_device(a, comm);
  if (precision_flag(a, "dtype", "bf16 compute over float32 master weights") == DType::BFloat16)
    o.compute_dtype = DType::BFloat16;
  o.param_dtype = precision_flag(a, "param-dtype", "parameters and gradients stored in bfloat16, optimiser state in "
                                 "float32");
  // A restart repeats no flag: what it leaves out is the run's own (what it gives must agree, see nn::train).
  if (resuming)
    nn::adopt_recorded_settings(o, nn::recorded_identity(ckpt), [&](const std::string& f) { return a.has(f); });
  const bool bf16 = o.compute_dtype == DType::BFloat16;

  // Rank 0 creates the output directory and tokenises the text once; the other ranks read what it wrote.
  const std::string data = a.required("data"), token_cache = o.out_dir + "/tokens.bin";
  o.data_file = data;
  if (lead) std::filesystem::create_directories(o.out_dir);
  comm.barrier();
  if (!o.resume && !a.flag("overwrite")) {
    const char* choices = ": add --resume to continue it, --overwrite to start afresh and replace it, or choose "
                          "another --out";
    UOE_CHECK(!nn::checkpoint_exists(ckpt), "--out ", o.out_dir, " already holds a run (", checkpoint_summary(ckpt),
              ")", choices);
    std::error_code ec;
    UOE_CHECK(std::filesystem::file_size(o.out_dir + "/metrics.jsonl", ec) == 0 || ec, "--out ", o.out_dir,
              " already holds a run (its metrics.jsonl, no checkpoint)", choices);
    UOE_CHECK(nn::checkpoint_history(ckpt).empty(), "--out ", o.out_dir, " already holds a run (its saved "
              "checkpoints ", nn::history_dir(ckpt, nn::checkpoint_history(ckpt).front()), "...)", choices);
  }
  // The tokenizer of a resumed run is its checkpoint's, of a fine-tuning run the --init-from checkpoint's; a new
  // run builds one from --tokenizer.
  std::unique_ptr<nn::Tokenizer> tok = resuming               ? nn::load_tokenizer(ckpt + "/tokenizer.json")
                                       : !o.init_from.empty() ? nn::load_tokenizer(o.init_from + "/tokenizer.json")
                                                              : make_tokenizer(a.str("tokenizer"), data);
  config.vocab_size = std::max(config.vocab_size, tok->vocab_size());
  std::shared_ptr<nn::TokenFile> tokens;
  {
    const watchdog::Paused paused;  // tokenising a large text may take longer than the collective timeout
    if (lead)
      tokens = open_tokens(data, *tok, token_cache,
                           resuming               ? checkpoint_tokens_advice(ckpt)
                           : !o.init_from.empty() ? checkpoint_tokens_advice(o.init_from)
                                                  : "use the tokenizer the file was prepared with (uoe prepare "
                                                    "--tokenizer-out <file>, then --tokenizer <file>)");
    comm.barrier();
  }
  if (!lead) tokens = is_token_file(data) ? std::make_shared<nn::TokenFile>(data)
                                          : std::make_shared<nn::TokenFile>(token_cache, data);
  const nn::TokenDataset dataset(tokens);
  const int64_t probe = a.integer("routing-probe-tokens");
  UOE_CHECK(probe >= 0, "--routing-probe-tokens must be >= 0 (0: no routing probe), got ", probe);
  if (probe > 0 && config.ffn.kind != nn::FfnKind::Dense) o.routing_probe = analysis::RoutingProbe(dataset, o.seq, probe);
  std::string ranks;
  if (comm.size() > 1) {
    ranks = " x " + std::to_string(comm.size()) + " ranks";
    if (o.zero1) ranks += " (ZeRO-1)";
    if (o.expert_parallel > 1) ranks += " (experts split across groups of " + std::to_string(o.expert_parallel) + ")";
  }
  if (lead)
    std::printf("uoe train: %s (%s FFN) on %s (%s%s)%s, %ld train / %ld val tokens, batch %ld x %ld, %ld steps -> %s\n",
                config.name.c_str(), nn::ffn_kind_name(config.ffn.kind), o.device.str().c_str(), bf16 ? "bf16" : "f32",
                o.param_dtype == DType::BFloat16 ? ", bf16 parameters" : "",
                ranks.c_str(), long(dataset.train_tokens()), long(dataset.val_tokens()), long(o.batch), long(o.seq), long(o.steps),
                o.out_dir.c_str());
  if (lead && o.resume) {
    if (resuming)
      std::printf("resuming at step %ld from %s\n", long(resumed_step), ckpt.c_str());
    else
      std::printf("--resume: no checkpoint in %s yet, starting at step 0\n", ckpt.c_str());
  }
  if (lead && !resuming && !o.init_from.empty())
    std::printf("starting from the weights of %s (a fresh optimiser, step 0)\n", o.init_from.c_str());
  const nn::TrainResult r = nn::train(config, o, dataset, *tok, comm);
  if (lead)
    std::printf("%s at step %ld: val loss %.4f nats/token, %.0f tokens/s (%.3g model TFLOP/s); %s\n",
                r.interrupted ? "stopped by signal" : "done", long(r.steps), r.final_val_loss, r.tokens_per_s,
                r.tokens_per_s * nn::training_flops_per_token(config, o.seq) / 1e12,
                o.save_at_end ? ("checkpoint in " + ckpt).c_str() : "no checkpoint (--no-save)");
  if (lead && !r.interrupted && r.steps < o.steps)
    std::printf("--minutes ended the run at step %ld of --steps %ld, with the learning rate still at %.3g (the cosine "
                "schedule spans --steps)%s\n",
                long(r.steps), long(o.steps), r.last_lr,
                resuming ? "" : ("; for a fully decayed run in this time, pass --steps " + std::to_string(r.steps)).c_str());
  if (lead && o.save_at_end) print_next_commands(o.out_dir, data, r.interrupted);
  return 0;
}

}  // namespace

int cmd_train(const Args& a) {
  Communicator& comm = world();
  return run_or_abort(comm, "uoe train", [&] { return train_command(a, comm); });
}

}  // namespace uoe::cli
