// The training loop: seeded batches keyed by (seed, step), AdamW/SGD with warmup+cosine, clipping,
// gradient accumulation, progress bar, validation, metrics.jsonl, atomic checkpoints, clean stop on signals;
// data parallel (rank shares of each batch, averaged gradients, optional ZeRO-1) when there are several ranks.
#include "nn/trainer.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <optional>

#include "autograd/grad_mode.h"
#include "core/allocator.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"
#include "core/slow_paths.h"
#include "nn/accounting.h"
#include "nn/checkpoint.h"
#include "nn/data_parallel.h"
#include "nn/expert_sharding.h"
#include "nn/metrics_log.h"
#include "nn/optim.h"
#include "nn/preflight.h"
#include "nn/progress.h"
#include "nn/trainer_state.h"
#include "nn/run_identity.h"
#include "nn/zero_optimizer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

std::atomic<int> g_stop_signal{0};
extern "C" void on_stop_signal(int sig) { g_stop_signal.store(sig); }

// Installs SIGINT/SIGTERM handlers for the lifetime of the object.
class StopSignals {
 public:
  StopSignals() {
    g_stop_signal.store(0);
    prev_int_ = std::signal(SIGINT, on_stop_signal);
    prev_term_ = std::signal(SIGTERM, on_stop_signal);
  }
  ~StopSignals() {
    std::signal(SIGINT, prev_int_);
    std::signal(SIGTERM, prev_term_);
  }
  bool requested() const { return g_stop_signal.load() != 0; }

 private:
  void (*prev_int_)(int);
  void (*prev_term_)(int);
};

json::Value layer_metrics(const LanguageModel& model) {
  json::Value layers = json::Value::array();
  for (const FfnStats& s : model.layer_stats()) {
    json::Value l = json::Value::object();
    if (s.routed()) {
      const RoutingSummary r = s.routing();
      json::Value load = json::Value::array();
      for (double f : r.load) load.push_back(f);
      l["load"] = load;
      l["balance"] = r.balance;
    }
    layers.push_back(l);
  }
  return layers;
}

// Appends rank 0's metrics line. A write that fails (a full disk) stops every rank at this step: the checkpoint is
// saved first when the run saves any (`save`: collective; empty under --no-save), then the error names the file.
void append_metrics(std::optional<MetricsLog>& log, const json::Value& line, Communicator& comm, int64_t step,
                    const std::function<void()>& save) {
  std::string error;
  if (log) {
    try {
      log->append(line);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  bool failed = !error.empty();
  if (comm.size() > 1) {  // the other ranks learn it: they stop with rank 0 (and take part in the save)
    const Tensor flag = from_vector<double>({failed ? 1.0 : 0.0}, {1});
    comm.all_reduce(flag);
    failed = flag.item<double>() > 0;
  }
  if (!failed) return;
  if (error.empty()) error = "[train] rank 0 could not write the metrics of step " + std::to_string(step);
  if (!save) fail(error, "; the run stopped at step ", step, " (--no-save: no checkpoint)");
  try {
    save();
  } catch (const Error& e) {
    fail(error, "; the run stopped at step ", step, ", and its checkpoint could not be saved either: ", e.what());
  }
  fail(error, "; the run stopped at step ", step, " after saving its checkpoint: make room (or repair the file), "
       "then --resume");
}

std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, const NamedTensors& params,
                                          const ZeroOptimizer::GroupOf& group_of) {
  UOE_CHECK(o.optimizer == "adamw" || o.optimizer == "sgd", "[train] unknown optimizer '", o.optimizer,
            "': expected adamw or sgd");
  auto make = [&o](const NamedTensors& p) -> std::unique_ptr<Optimizer> {
    if (o.optimizer == "sgd") return std::make_unique<SGD>(p, o.momentum, o.weight_decay);
    return std::make_unique<AdamW>(p, AdamWOptions{o.beta1, o.beta2, 1e-8, o.weight_decay});
  };
  if (o.zero1) return std::make_unique<ZeroOptimizer>(params, group_of, make);
  return make(params);
}

// This rank's rows of a batch tensor ([B, T] -> [count, T]).
Tensor rows_of(const Tensor& t, const RowRange& rows) { return t.narrow(0, rows.begin, rows.count).contiguous(); }

void check_expert_parallel(const ModelConfig& c, const TrainOptions& o, const Communicator& comm) {
  const int64_t ep = o.expert_parallel;
  UOE_CHECK(ep >= 1, "[train] --expert-parallel must be >= 1, got ", ep);
  if (ep == 1) return;
  UOE_CHECK(c.ffn.kind != FfnKind::Dense, "[train] --expert-parallel ", ep, ": ", c.name,
            " has a dense FFN, no experts to split (use an moe, aoe or uoe config)");
  UOE_CHECK(comm.size() % ep == 0, "[train] --expert-parallel ", ep, " must divide the ", comm.size(),
            " ranks (groups of ", ep, " consecutive ranks share the experts)");
  UOE_CHECK(c.ffn.n_experts % ep == 0, "[train] --expert-parallel ", ep, " must divide the ", c.ffn.n_experts,
            " experts of ", c.name);
  // Each expert's gradient sums the losses of its group's ranks before data parallelism weights it by this rank's
  // share of the batch: the shares must be equal.
  UOE_CHECK(o.batch % comm.size() == 0, "[train] --expert-parallel needs the batch (", o.batch,
            " rows) to split evenly across the ", comm.size(), " ranks");
}

}  // namespace

double evaluate(LanguageModel& model, const TokenDataset& data, int64_t batch, int64_t seq, int64_t max_batches,
                Communicator& comm) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double total = 0;
  int64_t tokens = 0;
  const Device device = model.embed->weight.device();
  for (int64_t k = 0, n = data.val_batch_count(batch, seq, max_batches); k < n; ++k) {
    const Batch b = data.val_batch(k, batch, seq);
    // Every rank runs every batch (on its rows), so that expert-parallel ranks meet in the same exchanges. A rank
    // left without rows by a short last batch runs one row it does not count.
    RowRange rows = rank_rows(b.x.size(0), comm.rank(), comm.size());
    const bool idle = rows.count == 0;
    if (idle) rows = {0, 1};
    const Tensor x = rows_of(b.x, rows);
    model.loss(x.to(device), rows_of(b.y, rows).to(device));
    if (idle) continue;
    total += model.last_ce.item<double>() * double(x.numel());
    tokens += x.numel();
  }
  model.train(was_training);
  const Tensor sums = from_vector<double>({total, double(tokens)}, {2});
  comm.all_reduce(sums);
  const std::vector<double> all = sums.to_vector<double>();
  UOE_CHECK(all[1] > 0, "[eval] the validation split has no complete window of ", seq + 1, " tokens");
  return all[0] / all[1];
}

// The numeric options, each named as its `uoe train` flag.
void check_numbers(const TrainOptions& o) {
  UOE_CHECK(o.steps > 0 && o.batch > 0 && o.seq > 0 && o.grad_accum > 0,
            "[train] --steps, --batch, --seq and --grad-accum must be positive, got ", o.steps, ", ", o.batch, ", ",
            o.seq, ", ", o.grad_accum);
  UOE_CHECK(o.batch <= kMaxBatchTokens / o.seq, "[train] --batch ", o.batch, " x --seq ", o.seq, " is ",
            double(o.batch) * double(o.seq), " tokens per micro-batch; at most ", kMaxBatchTokens, " (use --grad-accum "
            "for larger batches)");
  UOE_CHECK(std::isfinite(o.lr) && o.lr > 0, "[train] --lr must be a positive finite number, got ", o.lr);
  UOE_CHECK(std::isfinite(o.min_lr) && o.min_lr <= o.lr, "[train] --min-lr must be finite and at most --lr (",
            o.lr, "; negative: lr / 10), got ", o.min_lr);
  UOE_CHECK(std::isfinite(o.clip) && o.clip >= 0, "[train] --clip must be >= 0 (0: no clipping), got ", o.clip);
  UOE_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "[train] --weight-decay must be >= 0, got ",
            o.weight_decay);
  UOE_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.momentum >= 0 && o.momentum < 1,
            "[train] beta1, beta2 and momentum must be in [0, 1), got ", o.beta1, ", ", o.beta2, ", ", o.momentum);
  UOE_CHECK(o.eval_every >= 0 && o.save_every >= 0, "[train] --eval-every and --save-every must be >= 0 (0: only at "
            "the end), got ", o.eval_every, " and ", o.save_every);
  UOE_CHECK(o.eval_batches > 0, "[train] --eval-batches must be positive, got ", o.eval_batches);
  UOE_CHECK(std::isfinite(o.time_limit_s) && o.time_limit_s >= 0, "[train] --minutes must be >= 0 (0: no limit), "
            "got ", o.time_limit_s / 60);
  UOE_CHECK(o.bucket_bytes > 0, "[train] bucket_bytes must be positive, got ", o.bucket_bytes);
}

TrainResult train(const ModelConfig& config, const TrainOptions& o, const TokenDataset& data, const Tokenizer& tokenizer,
                  Communicator& comm) {
  check_numbers(o);
  data.check_windows(o.seq);  // before any step: a validation split too short would only fail at the first eval
  UOE_CHECK(!o.out_dir.empty(), "[train] an output directory is required");
  UOE_CHECK(o.batch >= comm.size(), "[train] the batch of ", o.batch, " rows is smaller than the ", comm.size(),
            " ranks: every rank needs at least one row");
  UOE_CHECK(o.seq <= config.context, "[train] --seq ", o.seq, " exceeds the model context ", config.context);
  UOE_CHECK(tokenizer.vocab_size() <= config.vocab_size, "[train] the tokenizer has ", tokenizer.vocab_size(),
            " ids but the model's vocab_size is ", config.vocab_size);
  check_expert_parallel(config, o, comm);
  UOE_CHECK(o.param_dtype == DType::Float32 || o.param_dtype == DType::BFloat16, "[train] parameters are stored in ",
            "float32 or bfloat16, not ", dtype_name(o.param_dtype));
  const bool lead = comm.rank() == 0;  // the rank that writes metrics, progress and checkpoints
  const std::string ckpt_dir = o.out_dir + "/checkpoint", metrics_path = o.out_dir + "/metrics.jsonl";
  if (lead) {
    std::filesystem::create_directories(o.out_dir);
    recover_directory(ckpt_dir);  // finishes an interrupted checkpoint write before any rank reads it
  }
  comm.barrier();
  // Before any other collective and any allocation: every rank runs the same run, and a resumed run is the one
  // its checkpoint recorded (or changes only what --allow-change names).
  const bool resuming = o.resume && checkpoint_exists(ckpt_dir);
  // A checkpoint directory that holds anything is a run: one that cannot be read whole is an error, never a new
  // run in its place.
  if (resuming) check_checkpoint(ckpt_dir, OptimizerState::Require);
  const json::Value identity = run_identity(config, o, tokenizer, data, comm.size());
  check_same_run_on_every_rank(identity, resuming ? read_trainer_state(ckpt_dir).step : 0, o.init_from, comm);
  if (resuming)
    for (const std::string& note : check_resumed_run(identity, ckpt_dir, o.allow_change))
      if (lead) std::fprintf(stderr, "[train] resuming with %s\n", note.c_str());
  check_training_memory(config, o, comm);
  manual_seed(o.seed);
  LanguageModel model(config);
  // Expert parallel: groups of E consecutive ranks each keep 1/E of every layer's experts; the ranks at the same
  // place in their groups (replicas) keep the same experts and average their gradients.
  std::unique_ptr<Communicator> expert_group, replica_group;
  ExpertSharding shards;
  if (o.expert_parallel > 1) {
    const int ep = int(o.expert_parallel);
    expert_group = comm.split(comm.rank() / ep, comm.rank());
    replica_group = comm.split(comm.rank() % ep, comm.rank());
    shards = ExpertSharding(model, *expert_group);  // before the move: only this rank's experts reach the device
  }
  // A run on a GPU lets its float32 GEMMs use TF32 tensor cores (ops::set_allow_tf32), as PyTorch's allow_tf32;
  // the setting is put back when the run ends.
  struct Tf32ForTheRun {
    bool previous = ops::allow_tf32();
    explicit Tf32ForTheRun(bool on) { ops::set_allow_tf32(previous || on); }
    ~Tf32ForTheRun() { ops::set_allow_tf32(previous); }
  } tf32(o.device.is_cuda());
  model.to(o.device);  // before the optimiser, so its state is created beside the parameters
  model.to(o.param_dtype);
  model.compute_dtype = o.compute_dtype;
  model.checkpoint_activations = o.checkpoint_activations;
  // This rank's parameters by the ranks that hold them: every rank, or (expert slices) its replicas.
  NamedTensors replicated, sharded;
  for (const auto& [name, p] : model.named_parameters()) (shards.sharded(name) ? sharded : replicated).emplace_back(name, p);
  const auto group_of = [&](const std::string& name) -> Communicator& {
    return shards.sharded(name) ? *replica_group : comm;
  };
  std::unique_ptr<Optimizer> opt = make_optimizer(o, model.named_parameters(), group_of);
  const int64_t warmup = resolved_warmup(o);
  const double min_lr = resolved_min_lr(o);

  int64_t start = 0, tokens_seen = 0;
  // Micro-batch i of the run is the (data_seed, i) window draw; `cursor` micro-batches were drawn so far. A
  // resumed run continues the saved stream, whatever its --seed and --grad-accum now.
  uint64_t data_seed = o.seed;
  int64_t cursor = 0;
  std::optional<MetricsLog> metrics;  // rank 0's
  if (resuming) {
    Checkpoint c = load_checkpoint(ckpt_dir, OptimizerState::Require);
    const TrainerState saved = trainer_state_from_json(c.trainer_state, ckpt_dir + "/trainer_state.json");
    model.load_state_dict(shards.slice(c.model), true, ckpt_dir + "/model.safetensors");
    opt->load_state(shards.slice(c.optimizer));
    start = saved.step;
    UOE_CHECK(start < o.steps, "[train] --steps ", o.steps, ": the run in ", o.out_dir, " is already at step ", start,
              "; pass a larger --steps with --allow-change steps to train it further");
    default_generator().set_state(saved.rng_seed, saved.rng_offset);
    tokens_seen = saved.tokens_seen;
    data_seed = saved.seed;
    cursor = saved.data_cursor;
    if (lead) metrics.emplace(MetricsLog::resumed(metrics_path, start));
  } else {
    if (!o.init_from.empty())
      model.load_state_dict(shards.slice(load_checkpoint(o.init_from, OptimizerState::Skip).model), true,
                            o.init_from + "/model.safetensors");
    if (lead) metrics.emplace(MetricsLog::fresh(metrics_path));
  }
  auto state_json = [&](int64_t step) {
    TrainerState s;
    s.step = step;
    s.tokens_seen = tokens_seen;
    s.seed = data_seed;
    s.init_from = o.init_from;
    s.data_cursor = cursor;
    s.rng_seed = default_generator().seed();
    s.rng_offset = default_generator().offset();
    s.lr = warmup_cosine_lr(step, warmup, o.steps, o.lr, min_lr);
    s.warmup = warmup;
    s.total_steps = o.steps;
    json::Value v = to_json(s);
    v["run"] = identity;  // what defines the run, for the checks of the next resume
    return v;
  };
  auto tensors_of = [](const NamedTensors& named) {
    std::vector<Tensor> out;
    for (const auto& [name, t] : named) out.push_back(t);
    return out;
  };
  const std::vector<Tensor> replicated_params = tensors_of(replicated), sharded_params = tensors_of(sharded);
  auto save = [&](int64_t step) {
    // Never weights that an update broke (a step without validation may be saved): every rank gets the same norm.
    const double norm = global_norm(replicated_params, sharded_params, expert_group.get());
    UOE_CHECK(std::isfinite(norm), "[train] the weights are not finite after step ", step, " (norm ", norm,
              "): training diverged in that step's update; nothing was saved; resume from the last checkpoint with a "
              "lower --lr");
    // Checkpoints hold whole tensors: ZeRO's row shards, then the expert slices, are gathered over the ranks one
    // tensor at a time as rank 0 writes them (every rank takes part, in the same order), so no rank ever holds the
    // whole optimiser state or every expert.
    save_checkpoint(lead, ckpt_dir, shards.gather(defer(model_tensors(model))), config,
                    shards.gather(opt->checkpoint_state()), state_json(step), tokenizer);
  };

  // Data parallel: this rank's rows of every batch, and gradients averaged over the global batch.
  const RowRange rows = rank_rows(o.batch, comm.rank(), comm.size());
  const double share = double(rows.count) / double(o.batch);
  std::vector<std::unique_ptr<DataParallel>> dps;  // over every rank, and for expert slices over the replicas
  if (comm.size() > 1) {
    dps.push_back(std::make_unique<DataParallel>(replicated, comm, share, o.bucket_bytes));
    if (!sharded.empty()) dps.push_back(std::make_unique<DataParallel>(sharded, *replica_group, share, o.bucket_bytes));
  }

  const double train_flops = training_flops_per_token(config, o.seq);
  StopSignals signals;
  TrainResult result;
  slow_paths::Report slow_report;  // fallback kernels taken from here on
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  Progress progress(stderr, ::isatty(STDERR_FILENO) == 1);
  int64_t session_tokens = 0, step = start;
  double step_began = elapsed();  // where this step's own time starts (evaluation and saving left out)
  model.train();
  while (step < o.steps) {
    const double lr = warmup_cosine_lr(step, warmup, o.steps, o.lr, min_lr);
    model.zero_grad();
    double loss_sum = 0;
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      const Batch b = data.train_batch(data_seed, uint64_t(cursor + micro), o.batch, o.seq, rows.begin, rows.count);
      if (micro == o.grad_accum - 1)
        for (auto& dp : dps) dp->reduce_next_backward();
      Tensor loss = model.loss(b.x.to(o.device), b.y.to(o.device));
      if (o.grad_accum > 1) loss = loss / double(o.grad_accum);
      loss.backward();
      loss_sum += model.last_ce.item<double>() / double(o.grad_accum);
    }
    for (auto& dp : dps) dp->finish();
    const double grad_norm = clip_grad_norm(replicated_params, o.clip, sharded_params, expert_group.get());
    // Every rank sees the same global norm. The update is not applied, and the last checkpoint stays as it was.
    UOE_CHECK(std::isfinite(grad_norm), "[train] the gradient norm is ", grad_norm, " at step ", step + 1,
              " (loss ", loss_sum, " on rank ", comm.rank(), "): training diverged; resume from the last checkpoint "
              "with a lower --lr (and --clip on)");
    opt->step(lr);
    result.last_lr = lr;
    cursor += o.grad_accum;
    ++step;
    const int64_t step_tokens = o.batch * o.seq * o.grad_accum;
    tokens_seen += step_tokens;
    session_tokens += step_tokens;
    const double tok_s = double(session_tokens) / std::max(elapsed(), 1e-9);
    // One all-reduce per step: the global mean loss, and whether any rank got a signal or ran out of time.
    const Tensor shared = from_vector<double>({loss_sum * share, signals.requested() ? 1.0 : 0.0,
                                               o.time_limit_s > 0 && elapsed() >= o.time_limit_s ? 1.0 : 0.0},
                                              {3});
    comm.all_reduce(shared);
    const std::vector<double> global = shared.to_vector<double>();
    const bool stopping = global[1] > 0 || global[2] > 0 || step == o.steps;

    json::Value m = json::Value::object();
    m["step"] = step;
    m["train_loss"] = global[0];
    m["lr"] = lr;
    m["grad_norm"] = grad_norm;
    m["tokens"] = tokens_seen;
    m["tokens_per_s"] = tok_s;
    m["model_tflops"] = tok_s * train_flops / 1e12;  // model FLOPs (no recomputation) per second, all ranks
    // the most tensor memory this process has held at once on its device so far (rank 0's), MiB
    m["peak_memory_mib"] = double(allocator_for(o.device).stats().peak) / double(1 << 20);
    if (lead) m["layers"] = layer_metrics(model);  // rank 0's share of the batch
    // this step alone: no start-up in it, and the previous step's optimiser update finishing on a GPU
    m["step_tokens_per_s"] = double(step_tokens) / std::max(elapsed() - step_began, 1e-9);
    if (o.progress && lead) {
      const double eta = o.time_limit_s > 0 ? std::max(0.0, o.time_limit_s - elapsed())
                                            : double(o.steps - step) * double(step_tokens) / std::max(tok_s, 1e-9);
      progress.step(step, o.steps, global[0], tok_s, eta, elapsed());
    }
    if ((o.eval_every > 0 && step % o.eval_every == 0) || stopping) {
      const double val = evaluate(model, data, o.batch, o.seq, o.eval_batches, comm);
      // Every rank has the same global loss. An update that made the weights non-finite shows here first; this
      // step is neither logged nor saved.
      UOE_CHECK(std::isfinite(val), "[train] the validation loss is ", val, " after step ", step,
                ": training diverged in that step's update; resume from the last checkpoint with a lower --lr");
      m["val_loss"] = val;
      result.curve.push_back({step, tokens_seen, val});
      result.final_val_loss = val;
      if (o.progress && lead) progress.validation(step, o.steps, global[0], val, elapsed());
    }
    // rank 0's slow paths since the run started (core/slow_paths.h), and one warning line per kind
    if (json::Value slow = slow_report.counts(); slow.size() > 0) m["slow_paths"] = std::move(slow);
    if (lead)
      for (const std::string& warning : slow_report.new_warnings("[train]")) {
        progress.finish();  // the warning on a line of its own, not after the bar
        std::fprintf(stderr, "%s\n", warning.c_str());
      }
    const bool saves = o.save_at_end || o.save_every > 0;
    append_metrics(metrics, m, comm, step, saves ? std::function<void()>([&] { save(step); }) : nullptr);
    if ((o.save_every > 0 && step % o.save_every == 0) || (stopping && o.save_at_end)) save(step);
    if (stopping) {
      result.interrupted = global[1] > 0;
      break;
    }
    step_began = elapsed();
  }
  if (o.progress && lead) progress.finish();
  result.steps = step;
  result.tokens_per_s = double(session_tokens) / std::max(elapsed(), 1e-9);
  return result;
}

}  // namespace uoe::nn
