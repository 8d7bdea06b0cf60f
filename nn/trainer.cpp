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
#include "nn/checkpoint_history.h"
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
  if (!save) fail(error, "; the run stopped at step ", step, " (no checkpoint: save_at_end is off)");
  try {
    save();
  } catch (const Error& e) {
    fail(error, "; the run stopped at step ", step, ", and its checkpoint could not be saved either: ", e.what());
  }
  fail(error, "; the run stopped at step ", step, " after saving its checkpoint: make room (or repair the file), "
       "then resume the run");
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
  UOE_CHECK(ep >= 1, "[train] expert_parallel must be >= 1, got ", ep);
  if (ep == 1) return;
  UOE_CHECK(c.ffn.kind != FfnKind::Dense, "[train] expert_parallel ", ep, ": ", c.name,
            " has a dense FFN, no experts to split (use an moe, aoe or uoe config)");
  UOE_CHECK(comm.size() % ep == 0, "[train] expert_parallel ", ep, " must divide the ", comm.size(),
            " ranks (groups of ", ep, " consecutive ranks share the experts)");
  UOE_CHECK(c.ffn.n_experts % ep == 0, "[train] expert_parallel ", ep, " must divide the ", c.ffn.n_experts,
            " experts of ", c.name);
  // Each expert's gradient sums the losses of its group's ranks before data parallelism weights it by this rank's
  // share of the batch: the shares must be equal.
  UOE_CHECK(o.batch % comm.size() == 0, "[train] expert_parallel needs the batch (", o.batch,
            " rows) to split evenly across the ", comm.size(), " ranks");
}

}  // namespace

double evaluate(LanguageModel& model, const TokenDataset& data, int64_t batch, int64_t seq, int64_t max_batches,
                Communicator& comm, const std::function<void(int64_t done, int64_t total)>& on_batch) {
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
    if (on_batch) on_batch(k + 1, n);
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

// The numeric options, each named as its TrainOptions field.
void check_numbers(const TrainOptions& o) {
  UOE_CHECK(o.steps > 0 && o.batch > 0 && o.seq > 0 && o.grad_accum > 0,
            "[train] steps, batch, seq and grad_accum must be positive, got ", o.steps, ", ", o.batch, ", ",
            o.seq, ", ", o.grad_accum);
  UOE_CHECK(o.batch <= kMaxBatchTokens / o.seq, "[train] batch ", o.batch, " x seq ", o.seq, " is ",
            double(o.batch) * double(o.seq), " tokens per micro-batch; at most ", kMaxBatchTokens, " (use grad_accum "
            "for larger batches)");
  UOE_CHECK(std::isfinite(o.lr) && o.lr > 0, "[train] lr must be a positive finite number, got ", o.lr);
  UOE_CHECK(std::isfinite(o.min_lr) && o.min_lr <= o.lr, "[train] min_lr must be finite and at most lr (",
            o.lr, "; negative: lr / 10), got ", o.min_lr);
  UOE_CHECK(std::isfinite(o.clip) && o.clip >= 0, "[train] clip must be >= 0 (0: no clipping), got ", o.clip);
  UOE_CHECK(std::isfinite(o.weight_decay) && o.weight_decay >= 0, "[train] weight_decay must be >= 0, got ",
            o.weight_decay);
  UOE_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.momentum >= 0 && o.momentum < 1,
            "[train] beta1, beta2 and momentum must be in [0, 1), got ", o.beta1, ", ", o.beta2, ", ", o.momentum);
  UOE_CHECK(o.eval_every >= 0 && o.save_every >= 0, "[train] eval_every and save_every must be >= 0 (0: only at "
            "the end), got ", o.eval_every, " and ", o.save_every);
  UOE_CHECK(o.keep_checkpoints >= 0, "[train] keep_checkpoints must be >= 0 (0: only the latest), got ",
            o.keep_checkpoints);
  UOE_CHECK(o.eval_batches > 0, "[train] eval_batches must be positive, got ", o.eval_batches);
  UOE_CHECK(std::isfinite(o.time_limit_s) && o.time_limit_s >= 0, "[train] time_limit_s must be >= 0 (0: no "
            "limit), got ", o.time_limit_s);
  UOE_CHECK(o.bucket_bytes > 0, "[train] bucket_bytes must be positive, got ", o.bucket_bytes);
}

namespace {

// One call of train(): set-up (checks, model, optimiser, resume), then step, log, evaluate-and-save until the run
// ends by steps, time, signal or error.
class TrainSession {
 public:
  TrainSession(const ModelConfig& config, const TrainOptions& o, const TokenDataset& data, const Tokenizer& tokenizer,
               Communicator& comm);
  TrainResult run();

 private:
  struct StepTotals {  // this step's, the same on every rank
    double train_loss = 0, grad_norm = 0, lr = 0;
    bool signalled = false, out_of_time = false;
  };
  void check_options() const;
  json::Value check_same_run();
  void build_model();
  void build_optimizer();
  void restore_or_init();
  // Removes the history saves of steps after `step` (rank 0; step < 0: all of them), saying so.
  void drop_history_after(int64_t step) const;
  json::Value state_json(int64_t step) const;
  void save(int64_t step);
  StepTotals train_step();
  json::Value step_metrics(const StepTotals& t, int64_t step_tokens, double step_began);
  void show_progress(double train_loss, int64_t step_tokens);
  void evaluate_into(json::Value& m, double train_loss);
  void log_and_save(json::Value& m, bool stopping, bool signalled);
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count(); }

  const ModelConfig& config_;
  const TrainOptions& o_;
  const TokenDataset& data_;
  const Tokenizer& tokenizer_;
  Communicator& comm_;
  const bool lead_;  // the rank that writes metrics, progress and checkpoints
  const std::string ckpt_dir_, metrics_path_;
  bool resuming_ = false;
  json::Value identity_;  // what defines the run (nn/run_identity.h)
  std::unique_ptr<LanguageModel> model_;
  // Expert parallel: groups of E consecutive ranks each keep 1/E of every layer's experts; the ranks at the same
  // place in their groups (replicas) keep the same experts and average their gradients.
  std::unique_ptr<Communicator> expert_group_, replica_group_;
  ExpertSharding shards_;
  NamedTensors replicated_, sharded_;  // this rank's parameters by the ranks that hold them
  std::vector<Tensor> replicated_params_, sharded_params_;
  std::unique_ptr<Optimizer> opt_;
  int64_t warmup_ = 0;
  double min_lr_ = 0;
  // Micro-batch i of the run is the (data_seed, i) window draw; `cursor` micro-batches were drawn so far. A
  // resumed run continues the saved stream, whatever its --seed and --grad-accum now.
  uint64_t data_seed_ = 0;
  int64_t cursor_ = 0, start_ = 0, step_ = 0, tokens_seen_ = 0, session_tokens_ = 0;
  std::optional<MetricsLog> metrics_;  // rank 0's
  // Data parallel: this rank's rows of every batch, and gradients averaged over the global batch.
  RowRange rows_;
  double share_ = 1;
  std::vector<std::unique_ptr<DataParallel>> dps_;  // over every rank, and for expert slices over the replicas
  std::optional<StopSignals> signals_;            // from the first step on
  TrainResult result_;
  std::optional<slow_paths::Report> slow_report_;  // fallback kernels taken from the first step on
  std::chrono::steady_clock::time_point t0_;
  std::optional<Progress> progress_;
};

TrainSession::TrainSession(const ModelConfig& config, const TrainOptions& o, const TokenDataset& data,
                           const Tokenizer& tokenizer, Communicator& comm)
    : config_(config), o_(o), data_(data), tokenizer_(tokenizer), comm_(comm), lead_(comm.rank() == 0),
      ckpt_dir_(o.out_dir + "/checkpoint"), metrics_path_(o.out_dir + "/metrics.jsonl") {
  check_options();
  identity_ = check_same_run();
  check_training_memory(config_, o_, comm_);
  manual_seed(o_.seed);
  build_model();
}

void TrainSession::check_options() const {
  check_numbers(o_);
  data_.check_windows(o_.seq);  // before any step: a validation split too short would only fail at the first eval
  UOE_CHECK(!o_.out_dir.empty(), "[train] an output directory is required");
  UOE_CHECK(o_.batch >= comm_.size(), "[train] the batch of ", o_.batch, " rows is smaller than the ", comm_.size(),
            " ranks: every rank needs at least one row");
  UOE_CHECK(o_.seq <= config_.context, "[train] seq ", o_.seq, " exceeds the model context ", config_.context);
  UOE_CHECK(tokenizer_.vocab_size() <= config_.vocab_size, "[train] the tokenizer has ", tokenizer_.vocab_size(),
            " ids but the model's vocab_size is ", config_.vocab_size);
  check_expert_parallel(config_, o_, comm_);
  UOE_CHECK(o_.param_dtype == DType::Float32 || o_.param_dtype == DType::BFloat16, "[train] parameters are stored ",
            "in float32 or bfloat16, not ", dtype_name(o_.param_dtype));
}

// Before any other collective and any allocation: every rank runs the same run, and a resumed run is the one its
// checkpoint recorded (or changes only what --allow-change names). Returns the run identity.
json::Value TrainSession::check_same_run() {
  if (lead_) {
    std::filesystem::create_directories(o_.out_dir);
    recover_directory(ckpt_dir_);  // finishes an interrupted checkpoint write before any rank reads it
  }
  comm_.barrier();
  resuming_ = o_.resume && checkpoint_exists(ckpt_dir_);
  // A checkpoint directory that holds anything is a run: one that cannot be read whole is an error, never a new
  // run in its place.
  if (resuming_) check_checkpoint(ckpt_dir_, OptimizerState::Require);
  json::Value identity = run_identity(config_, o_, tokenizer_, data_, comm_.size());
  check_same_run_on_every_rank(identity, resuming_ ? read_trainer_state(ckpt_dir_).step : 0, o_.init_from, comm_);
  if (resuming_)
    for (const std::string& note : check_resumed_run(identity, ckpt_dir_, o_.allow_change))
      if (lead_) std::fprintf(stderr, "[train] resuming with %s\n", note.c_str());
  return identity;
}

void TrainSession::build_model() {
  model_ = std::make_unique<LanguageModel>(config_);
  if (o_.expert_parallel > 1) {
    const int ep = int(o_.expert_parallel);
    expert_group_ = comm_.split(comm_.rank() / ep, comm_.rank());
    replica_group_ = comm_.split(comm_.rank() % ep, comm_.rank());
    shards_ = ExpertSharding(*model_, *expert_group_);  // before the move: only this rank's experts reach the device
  }
}

// After the model is on its device and in its dtype, so that the optimiser state is created beside the parameters.
void TrainSession::build_optimizer() {
  for (const auto& [name, p] : model_->named_parameters())
    (shards_.sharded(name) ? sharded_ : replicated_).emplace_back(name, p);
  const auto group_of = [this](const std::string& name) -> Communicator& {
    return shards_.sharded(name) ? *replica_group_ : comm_;
  };
  opt_ = make_optimizer(o_, model_->named_parameters(), group_of);
  warmup_ = resolved_warmup(o_);
  min_lr_ = resolved_min_lr(o_);
  for (const auto& [name, t] : replicated_) replicated_params_.push_back(t);
  for (const auto& [name, t] : sharded_) sharded_params_.push_back(t);
  rows_ = rank_rows(o_.batch, comm_.rank(), comm_.size());
  share_ = double(rows_.count) / double(o_.batch);
  if (comm_.size() > 1) {
    dps_.push_back(std::make_unique<DataParallel>(replicated_, comm_, share_, o_.bucket_bytes));
    if (!sharded_.empty())
      dps_.push_back(std::make_unique<DataParallel>(sharded_, *replica_group_, share_, o_.bucket_bytes));
  }
}

// A resumed run takes its weights, optimiser state, random stream and data position from its checkpoint; a
// fine-tuning run its weights from init_from.
void TrainSession::restore_or_init() {
  data_seed_ = o_.seed;
  if (!resuming_) {
    if (!o_.init_from.empty())
      model_->load_state_dict(shards_.slice(load_checkpoint(o_.init_from, OptimizerState::Skip).model), true,
                              o_.init_from + "/model.safetensors");
    if (lead_) {
      metrics_.emplace(MetricsLog::fresh(metrics_path_));
      drop_history_after(-1);  // a new run in the place of one: its saves go with its metrics
    }
    return;
  }
  Checkpoint c = load_checkpoint(ckpt_dir_, OptimizerState::Require);
  const TrainerState saved = trainer_state_from_json(c.trainer_state, ckpt_dir_ + "/trainer_state.json");
  model_->load_state_dict(shards_.slice(c.model), true, ckpt_dir_ + "/model.safetensors");
  opt_->load_state(shards_.slice(c.optimizer));
  start_ = saved.step;
  UOE_CHECK(start_ < o_.steps, "[train] steps ", o_.steps, ": the run in ", o_.out_dir, " is already at step ",
            start_, "; to train it further, raise steps and allow that change (allow_change: steps)");
  default_generator().set_state(saved.rng_seed, saved.rng_offset);
  tokens_seen_ = saved.tokens_seen;
  data_seed_ = saved.seed;
  cursor_ = saved.data_cursor;
  if (lead_) {
    metrics_.emplace(MetricsLog::resumed(metrics_path_, start_));
    drop_history_after(start_);  // saves of the steps being redone, as their metrics lines
  }
}

void TrainSession::drop_history_after(int64_t step) const {
  const std::vector<int64_t> dropped = drop_checkpoint_history_after(ckpt_dir_, step);
  if (!dropped.empty())
    std::fprintf(stderr, "[train] removed %zu saved checkpoints of %s (%s-%ld to %s-%ld)\n", dropped.size(),
                 step < 0 ? "the run this one replaces" : "the steps being redone", ckpt_dir_.c_str(),
                 long(dropped.front()), ckpt_dir_.c_str(), long(dropped.back()));
}

json::Value TrainSession::state_json(int64_t step) const {
  TrainerState s;
  s.step = step;
  s.tokens_seen = tokens_seen_;
  s.seed = data_seed_;
  s.init_from = o_.init_from;
  s.data_cursor = cursor_;
  s.rng_seed = default_generator().seed();
  s.rng_offset = default_generator().offset();
  s.lr = warmup_cosine_lr(step, warmup_, o_.steps, o_.lr, min_lr_);
  s.warmup = warmup_;
  s.total_steps = o_.steps;
  json::Value v = to_json(s);
  v["run"] = identity_;  // what defines the run, for the checks of the next resume
  return v;
}

void TrainSession::save(int64_t step) {
  // Never weights that an update broke (a step without validation may be saved): every rank gets the same norm.
  const double norm = global_norm(replicated_params_, sharded_params_, expert_group_.get());
  UOE_CHECK(std::isfinite(norm), "[train] the weights are not finite after step ", step, " (norm ", norm,
            "): training diverged in that step's update; nothing was saved; resume from the last checkpoint with a "
            "lower learning rate");
  // Checkpoints hold whole tensors: ZeRO's row shards, then the expert slices, are gathered over the ranks one
  // tensor at a time as rank 0 writes them (every rank takes part, in the same order), so no rank ever holds the
  // whole optimiser state or every expert.
  save_checkpoint(lead_, ckpt_dir_, shards_.gather(defer(model_tensors(*model_))), config_,
                  shards_.gather(opt_->checkpoint_state()), state_json(step), tokenizer_);
  if (lead_) keep_checkpoint_history(ckpt_dir_, step, o_.keep_checkpoints);  // once the latest is complete
}

// One optimiser step over grad_accum micro-batches; then one all-reduce: the global mean loss, and whether any
// rank got a signal or ran out of time.
TrainSession::StepTotals TrainSession::train_step() {
  StepTotals t;
  t.lr = warmup_cosine_lr(step_, warmup_, o_.steps, o_.lr, min_lr_);
  model_->zero_grad();
  double loss_sum = 0;
  for (int64_t micro = 0; micro < o_.grad_accum; ++micro) {
    const Batch b = data_.train_batch(data_seed_, uint64_t(cursor_ + micro), o_.batch, o_.seq, rows_.begin,
                                      rows_.count);
    if (micro == o_.grad_accum - 1)
      for (auto& dp : dps_) dp->reduce_next_backward();
    Tensor loss = model_->loss(b.x.to(o_.device), b.y.to(o_.device));
    if (o_.grad_accum > 1) loss = loss / double(o_.grad_accum);
    loss.backward();
    loss_sum += model_->last_ce.item<double>() / double(o_.grad_accum);
  }
  for (auto& dp : dps_) dp->finish();
  t.grad_norm = clip_grad_norm(replicated_params_, o_.clip, sharded_params_, expert_group_.get());
  // Every rank sees the same global norm. The update is not applied, and the last checkpoint stays as it was.
  UOE_CHECK(std::isfinite(t.grad_norm), "[train] the gradient norm is ", t.grad_norm, " at step ", step_ + 1,
            " (loss ", loss_sum, " on rank ", comm_.rank(), "): training diverged; resume from the last checkpoint "
            "with a lower learning rate (and gradient clipping on)");
  opt_->step(t.lr);
  result_.last_lr = t.lr;
  cursor_ += o_.grad_accum;
  ++step_;
  const Tensor shared = from_vector<double>({loss_sum * share_, signals_->requested() ? 1.0 : 0.0,
                                             o_.time_limit_s > 0 && elapsed() >= o_.time_limit_s ? 1.0 : 0.0},
                                            {3});
  comm_.all_reduce(shared);
  const std::vector<double> global = shared.to_vector<double>();
  t.train_loss = global[0];
  t.signalled = global[1] > 0;
  t.out_of_time = global[2] > 0;
  return t;
}

json::Value TrainSession::step_metrics(const StepTotals& t, int64_t step_tokens, double step_began) {
  const double tok_s = double(session_tokens_) / std::max(elapsed(), 1e-9);
  json::Value m = json::Value::object();
  m["step"] = step_;
  m["train_loss"] = t.train_loss;
  m["lr"] = t.lr;
  m["grad_norm"] = t.grad_norm;
  m["tokens"] = tokens_seen_;
  m["tokens_per_s"] = tok_s;
  // model FLOPs (no recomputation) per second, all ranks
  m["model_tflops"] = tok_s * training_flops_per_token(config_, o_.seq) / 1e12;
  // the most tensor memory this process has held at once on its device so far (rank 0's), MiB
  m["peak_memory_mib"] = double(allocator_for(o_.device).stats().peak) / double(1 << 20);
  if (lead_) m["layers"] = layer_metrics(*model_);  // rank 0's share of the batch
  // this step alone: no start-up in it, and the previous step's optimiser update finishing on a GPU
  m["step_tokens_per_s"] = double(step_tokens) / std::max(elapsed() - step_began, 1e-9);
  return m;
}

// The bar follows whichever of the step count and the time limit ends the run first.
void TrainSession::show_progress(double train_loss, int64_t step_tokens) {
  if (!progress_) return;
  const double tok_s = double(session_tokens_) / std::max(elapsed(), 1e-9);
  double fraction = double(step_) / double(o_.steps);
  double eta = double(o_.steps - step_) * double(step_tokens) / std::max(tok_s, 1e-9);
  if (o_.time_limit_s > 0) {
    fraction = std::max(fraction, elapsed() / o_.time_limit_s);
    eta = std::min(eta, std::max(0.0, o_.time_limit_s - elapsed()));
  }
  progress_->step(step_, o_.steps, train_loss, tok_s, eta, elapsed(), std::min(fraction, 1.0));
}

void TrainSession::evaluate_into(json::Value& m, double train_loss) {
  const double val = evaluate(*model_, data_, o_.batch, o_.seq, o_.eval_batches, comm_);
  // Every rank has the same global loss. An update that made the weights non-finite shows here first; this step is
  // neither logged nor saved.
  UOE_CHECK(std::isfinite(val), "[train] the validation loss is ", val, " after step ", step_,
            ": training diverged in that step's update; resume from the last checkpoint with a lower learning rate");
  m["val_loss"] = val;
  if (o_.routing_probe && lead_ && o_.expert_parallel == 1) m["routing"] = o_.routing_probe(*model_);
  result_.curve.push_back({step_, tokens_seen_, val});
  result_.final_val_loss = val;
  if (progress_) progress_->validation(step_, o_.steps, train_loss, val, elapsed());
}

void TrainSession::log_and_save(json::Value& m, bool stopping, bool signalled) {
  // rank 0's slow paths since the run started (core/slow_paths.h), and one warning line per kind
  if (json::Value slow = slow_report_->counts(); slow.size() > 0) m["slow_paths"] = std::move(slow);
  if (lead_)
    for (const std::string& warning : slow_report_->new_warnings("[train]")) {
      if (progress_) progress_->finish();  // the warning on a line of its own, not after the bar
      std::fprintf(stderr, "%s\n", warning.c_str());
    }
  const int64_t step = step_;
  const bool saves = o_.save_at_end || o_.save_every > 0;
  append_metrics(metrics_, m, comm_, step, saves ? std::function<void()>([&] { save(step); }) : nullptr);
  const bool at_end = stopping && o_.save_at_end;
  if (at_end && signalled && lead_) {
    if (progress_) progress_->finish();
    std::fprintf(stderr, "[train] stopped by signal at step %ld: saving checkpoint...\n", long(step));
  }
  if ((o_.save_every > 0 && step % o_.save_every == 0) || at_end) save(step);
}

TrainResult TrainSession::run() {
  // A run on a GPU lets its float32 GEMMs use TF32 tensor cores (ops::set_allow_tf32), as PyTorch's allow_tf32;
  // the setting is put back when the run ends.
  struct Tf32ForTheRun {
    bool previous = ops::allow_tf32();
    explicit Tf32ForTheRun(bool on) { ops::set_allow_tf32(previous || on); }
    ~Tf32ForTheRun() { ops::set_allow_tf32(previous); }
  } tf32(o_.device.is_cuda());
  model_->to(o_.device);  // before the optimiser, so its state is created beside the parameters
  model_->to(o_.param_dtype);
  model_->compute_dtype = o_.compute_dtype;
  model_->checkpoint_activations = o_.checkpoint_activations;
  build_optimizer();
  restore_or_init();
  signals_.emplace();
  slow_report_.emplace();
  t0_ = std::chrono::steady_clock::now();
  if (o_.progress && lead_) progress_.emplace(stderr, ::isatty(STDERR_FILENO) == 1);
  step_ = start_;
  double step_began = elapsed();  // where this step's own time starts (evaluation and saving left out)
  model_->train();
  while (step_ < o_.steps) {
    const StepTotals t = train_step();
    const int64_t step_tokens = o_.batch * o_.seq * o_.grad_accum;
    tokens_seen_ += step_tokens;
    session_tokens_ += step_tokens;
    const bool stopping = t.signalled || t.out_of_time || step_ == o_.steps;
    json::Value m = step_metrics(t, step_tokens, step_began);
    show_progress(t.train_loss, step_tokens);
    if ((o_.eval_every > 0 && step_ % o_.eval_every == 0) || stopping) evaluate_into(m, t.train_loss);
    log_and_save(m, stopping, t.signalled);
    if (stopping) {
      result_.interrupted = t.signalled;
      break;
    }
    step_began = elapsed();
  }
  if (progress_) progress_->finish();
  result_.steps = step_;
  result_.tokens_per_s = double(session_tokens_) / std::max(elapsed(), 1e-9);
  return result_;
}

}  // namespace

TrainResult train(const ModelConfig& config, const TrainOptions& o, const TokenDataset& data, const Tokenizer& tokenizer,
                  Communicator& comm) {
  return TrainSession(config, o, data, tokenizer, comm).run();
}

}  // namespace uoe::nn
