// Trainer: the seeded, resumable training loop with progress bar, validation, metrics.jsonl and signal-safe checkpoints.
#pragma once
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nn/dataset.h"
#include "nn/transformer.h"

namespace uoe::nn {

struct TrainOptions {
  int64_t steps = 1000;
  int64_t batch = 16;
  int64_t seq = 256;
  int64_t grad_accum = 1;    // micro-batches per step
  double lr = 1e-3;
  double min_lr = -1;        // < 0: lr / 10
  int64_t warmup = -1;       // < 0: min(100, steps / 10)
  std::string optimizer = "adamw";  // adamw | sgd
  double beta1 = 0.9, beta2 = 0.95, weight_decay = 0.1, momentum = 0.9;
  double clip = 1.0;
  uint64_t seed = 0;
  int64_t eval_every = 100;  // 0: only at the end
  int64_t eval_batches = 8;
  int64_t save_every = 0;    // 0: only at the end (and on SIGINT/SIGTERM)
  double time_limit_s = 0;   // > 0: stop (and evaluate, save) once this much wall time has passed
  bool resume = false;
  bool progress = true;      // the one-line progress bar on stderr
  std::string out_dir;       // metrics.jsonl and checkpoint/ go here
  Device device = Device::cpu();       // where the model, its gradients and the optimiser state live
  std::optional<DType> compute_dtype;  // mixed precision (e.g. bfloat16) over float32 master weights
};

struct EvalPoint {
  int64_t step = 0;
  int64_t tokens = 0;
  double val_loss = 0;
};

struct TrainResult {
  int64_t steps = 0;          // steps completed in total (resumed runs count earlier steps)
  double tokens_per_s = 0;    // this session's training throughput
  double final_val_loss = 0;  // nats per token
  bool interrupted = false;   // stopped by SIGINT/SIGTERM
  std::vector<EvalPoint> curve;
};

// Mean next-token cross-entropy (nats/token) over up to max_batches validation batches.
double evaluate(LanguageModel& model, const TokenDataset& data, int64_t batch, int64_t seq, int64_t max_batches);

// Trains `config` on `data` (token ids from `tokenizer`), writing into options.out_dir.
TrainResult train(const ModelConfig& config, const TrainOptions& options, const TokenDataset& data,
                  const Tokenizer& tokenizer);

}  // namespace uoe::nn
