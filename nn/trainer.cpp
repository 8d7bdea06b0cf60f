// The training loop: seeded batches keyed by (seed, step), AdamW/SGD with warmup+cosine, clipping,
// gradient accumulation, progress bar, validation, metrics.jsonl, atomic checkpoints, clean stop on signals.
#include "nn/trainer.h"


#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/checkpoint.h"
#include "nn/optim.h"

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

std::string format_duration(double s) {
  const int64_t t = int64_t(s + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", long(t / 3600), long(t / 60 % 60), long(t % 60));
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", long(t / 60), long(t % 60));
  return buf;
}

void draw_progress(int64_t step, int64_t total, double loss, double tok_s, double eta_s) {
  constexpr int kWidth = 24;
  const int filled = total > 0 ? int(double(kWidth) * double(step) / double(total)) : 0;
  std::string bar(size_t(filled), '#');
  bar.resize(kWidth, '.');
  std::fprintf(stderr, "\r[%s] step %ld/%ld | loss %.4f | %.0f tok/s | ETA %s   ", bar.c_str(), long(step), long(total),
               loss, tok_s, format_duration(eta_s).c_str());
  std::fflush(stderr);
}

// Keeps the metrics lines of steps <= `step` (a resumed run rewrites what came after its checkpoint).
void truncate_metrics(const std::string& path, int64_t step) {
  std::ifstream in(path);
  if (!in) return;
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (json::parse(line, path).at("step").as_int() <= step) kept += line + "\n";
  }
  in.close();
  std::ofstream(path, std::ios::trunc) << kept;
}

json::Value layer_metrics(const LanguageModel& model) {
  json::Value layers = json::Value::array();
  for (const FfnStats& s : model.layer_stats()) {
    json::Value l = json::Value::object();
    if (s.load.defined()) {
      json::Value load = json::Value::array();
      for (double f : s.load.to_vector<double>()) load.push_back(f);
      l["load"] = load;
      l["balance"] = s.balance;
    }
    layers.push_back(l);
  }
  return layers;
}

std::unique_ptr<Optimizer> make_optimizer(const TrainOptions& o, const LanguageModel& model) {
  if (o.optimizer == "sgd") return std::make_unique<SGD>(model.named_parameters(), o.momentum, o.weight_decay);
  UOE_CHECK(o.optimizer == "adamw", "[train] unknown optimizer '", o.optimizer, "': expected adamw or sgd");
  return std::make_unique<AdamW>(model.named_parameters(), AdamWOptions{o.beta1, o.beta2, 1e-8, o.weight_decay});
}

}  // namespace

double evaluate(LanguageModel& model, const TokenDataset& data, int64_t batch, int64_t seq, int64_t max_batches) {
  NoGradGuard no_grad;
  const bool was_training = model.is_training();
  model.eval();
  double total = 0;
  int64_t tokens = 0;
  for (const Batch& b : data.val_batches(batch, seq, max_batches)) {
    const Device device = model.embed->weight.device();
    model.loss(b.x.to(device), b.y.to(device));
    total += model.last_ce.item<double>() * double(b.x.numel());
    tokens += b.x.numel();
  }
  model.train(was_training);
  UOE_CHECK(tokens > 0, "[eval] the validation split has no complete window of ", seq + 1, " tokens");
  return total / double(tokens);
}

TrainResult train(const ModelConfig& config, const TrainOptions& o, const TokenDataset& data, const Tokenizer& tokenizer) {
  UOE_CHECK(!o.out_dir.empty(), "[train] an output directory is required");
  UOE_CHECK(o.seq <= config.context, "[train] --seq ", o.seq, " exceeds the model context ", config.context);
  UOE_CHECK(tokenizer.vocab_size() <= config.vocab_size, "[train] the tokenizer has ", tokenizer.vocab_size(),
            " ids but the model's vocab_size is ", config.vocab_size);
  std::filesystem::create_directories(o.out_dir);
  const std::string ckpt_dir = o.out_dir + "/checkpoint", metrics_path = o.out_dir + "/metrics.jsonl";
  manual_seed(o.seed);
  LanguageModel model(config);
  model.to(o.device);  // before the optimiser, so its state is created beside the parameters
  model.compute_dtype = o.compute_dtype;
  std::unique_ptr<Optimizer> opt = make_optimizer(o, model);
  const int64_t warmup = o.warmup >= 0 ? o.warmup : std::min<int64_t>(100, o.steps / 10);
  const double min_lr = o.min_lr >= 0 ? o.min_lr : o.lr / 10;

  int64_t start = 0, tokens_seen = 0;
  if (o.resume && checkpoint_exists(ckpt_dir)) {
    Checkpoint c = load_checkpoint(ckpt_dir);
    model.load_state_dict(c.model);
    opt->load_state(c.optimizer);
    start = c.trainer_state.at("step").as_int();
    const json::Value& rng = c.trainer_state.at("rng");
    default_generator().set_state(rng.at("seed").as_uint(), rng.at("offset").as_uint());
    tokens_seen = c.trainer_state.at("tokens_seen").as_int();
    truncate_metrics(metrics_path, start);
  } else {
    std::ofstream(metrics_path, std::ios::trunc);
  }
  auto state_json = [&](int64_t step) {
    json::Value s = json::Value::object();
    s["step"] = step;
    s["tokens_seen"] = tokens_seen;
    s["seed"] = o.seed;
    s["data_cursor"] = step * o.grad_accum;  // batches are keyed by (seed, micro-step)
    json::Value rng = json::Value::object();  // the default generator (initialisation, dropout)
    rng["seed"] = default_generator().seed();
    rng["offset"] = default_generator().offset();
    s["rng"] = rng;
    s["lr"] = warmup_cosine_lr(step, warmup, o.steps, o.lr, min_lr);
    s["warmup"] = warmup;
    s["total_steps"] = o.steps;
    return s;
  };
  auto save = [&](int64_t step) { save_checkpoint(ckpt_dir, model, config, opt.get(), state_json(step), tokenizer); };

  StopSignals signals;
  std::ofstream metrics(metrics_path, std::ios::app);
  TrainResult result;
  const std::vector<Tensor> params = model.parameters();
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  int64_t session_tokens = 0, step = start;
  model.train();
  while (step < o.steps) {
    const double lr = warmup_cosine_lr(step, warmup, o.steps, o.lr, min_lr);
    model.zero_grad();
    double loss_sum = 0;
    for (int64_t micro = 0; micro < o.grad_accum; ++micro) {
      const Batch b = data.train_batch(o.seed, uint64_t(step * o.grad_accum + micro), o.batch, o.seq);
      Tensor loss = model.loss(b.x.to(o.device), b.y.to(o.device));
      if (o.grad_accum > 1) loss = loss / double(o.grad_accum);
      loss.backward();
      loss_sum += model.last_ce.item<double>() / double(o.grad_accum);
    }
    const double grad_norm = clip_grad_norm(params, o.clip);
    opt->step(lr);
    ++step;
    const int64_t step_tokens = o.batch * o.seq * o.grad_accum;
    tokens_seen += step_tokens;
    session_tokens += step_tokens;
    const double tok_s = double(session_tokens) / std::max(elapsed(), 1e-9);

    json::Value m = json::Value::object();
    m["step"] = step;
    m["train_loss"] = loss_sum;
    m["lr"] = lr;
    m["grad_norm"] = grad_norm;
    m["tokens"] = tokens_seen;
    m["tokens_per_s"] = tok_s;
    m["layers"] = layer_metrics(model);
    const bool out_of_time = o.time_limit_s > 0 && elapsed() >= o.time_limit_s;
    const bool stopping = signals.requested() || out_of_time || step == o.steps;
    if ((o.eval_every > 0 && step % o.eval_every == 0) || stopping) {
      const double val = evaluate(model, data, o.batch, o.seq, o.eval_batches);
      m["val_loss"] = val;
      result.curve.push_back({step, tokens_seen, val});
      result.final_val_loss = val;
    }
    metrics << m.dump() << "\n" << std::flush;
    if (o.progress) {
      const double eta = double(o.steps - step) * double(step_tokens) / std::max(tok_s, 1e-9);
      draw_progress(step, o.steps, loss_sum, tok_s, o.time_limit_s > 0 ? std::max(0.0, o.time_limit_s - elapsed()) : eta);
    }
    if ((o.save_every > 0 && step % o.save_every == 0) || stopping) save(step);
    if (stopping) {
      result.interrupted = signals.requested();
      break;
    }
  }
  if (o.progress) std::fprintf(stderr, "\n");
  result.steps = step;
  result.tokens_per_s = double(session_tokens) / std::max(elapsed(), 1e-9);
  return result;
}

}  // namespace uoe::nn
