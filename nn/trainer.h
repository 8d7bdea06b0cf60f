// Trainer: the seeded, resumable training loop with progress bar, validation, metrics.jsonl and signal-safe checkpoints,
// on one process or data parallel across the ranks of a communicator.
#pragma once
#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/json.h"
#include "nn/dataset.h"
#include "nn/transformer.h"

namespace uoe::nn {

// The most tokens (--batch x --seq) one micro-batch may hold: far past what any one machine trains at once, it
// refuses sizes of a mistake before anything is allocated.
inline constexpr int64_t kMaxBatchTokens = int64_t(1) << 28;

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
  double clip = 1.0;          // the global gradient norm's limit; 0: no clipping
  uint64_t seed = 0;
  int64_t eval_every = 100;  // 0: only at the end
  int64_t eval_batches = 8;
  int64_t save_every = 0;    // 0: only at the end (and on SIGINT/SIGTERM)
  // > 0: the last this many saves are also kept as <out_dir>/checkpoint-<step> (nn/checkpoint_history.h)
  int64_t keep_checkpoints = 0;
  bool save_at_end = true;   // false: no checkpoint when the run ends (throughput runs); save_every still applies
  double time_limit_s = 0;   // > 0: stop (and evaluate, save) once this much wall time has passed
  bool resume = false;
  // A checkpoint directory: a new run (not one resumed from out_dir) starts from its model weights, with a fresh
  // optimiser at step 0 (fine-tuning). The model configuration must be the checkpoint's.
  std::string init_from;
  bool progress = true;      // the one-line progress bar on stderr
  std::string out_dir;       // metrics.jsonl and checkpoint/ go here
  Device device = Device::cpu();       // where the model, its gradients and the optimiser state live
  std::optional<DType> compute_dtype;  // mixed precision (e.g. bfloat16) over float32 master weights
  // Parameter (and gradient) storage: float32, or bfloat16 (half the memory; the optimiser state stays float32
  // and updates are rounded back stochastically; the residual stream, norms, router and loss stay float32).
  DType param_dtype = DType::Float32;
  bool checkpoint_activations = false; // recompute each block in backward instead of keeping its activations
  bool zero1 = false;                  // several ranks: shard the optimiser state across them (ZeRO stage 1)
  int64_t expert_parallel = 1;         // > 1: groups of this many ranks split every layer's experts among them
  int64_t bucket_bytes = int64_t(25) << 20;  // several ranks: size of the gradient all-reduce buckets
  // The file the tokens were made from (`uoe train --data`), whose size and hash the run identity records
  // (nn/run_identity.h); empty: the token file itself.
  std::string data_file;
  // Settings of the run identity that a resume may change (--allow-change), e.g. "steps"; others that differ
  // from the checkpoint's are refused.
  std::vector<std::string> allow_change;
  // Before allocating, the training memory estimate is compared with what the process may use (nn/preflight.h);
  // false: start anyway (--skip-memory-check).
  bool memory_check = true;
  // Called on rank 0 after each validation, with the model between steps; what it returns is logged as the
  // evaluation line's "routing" field. It must leave the weights, the random generator and the training mode as it
  // found them (the uoe program wires analysis::RoutingProbe here). Not called with expert_parallel > 1 (each rank
  // holds only its share of the experts). Empty: nothing.
  std::function<json::Value(LanguageModel& model)> routing_probe;
};

// The warmup steps and the final learning rate of a run: the options', or their defaults.
inline int64_t resolved_warmup(const TrainOptions& o) {
  return o.warmup >= 0 ? o.warmup : std::min<int64_t>(100, o.steps / 10);
}
inline double resolved_min_lr(const TrainOptions& o) { return o.min_lr >= 0 ? o.min_lr : o.lr / 10; }

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
  double last_lr = 0;         // the learning rate of the last step taken (this session's)
  std::vector<EvalPoint> curve;
};

// Mean next-token cross-entropy (nats/token) over up to max_batches validation batches; with several ranks each
// evaluates its rows (rank_rows) of every batch and the result is the mean over all of them.
// on_batch (optional) is called after each batch with the batches done and the batches in all.
double evaluate(LanguageModel& model, const TokenDataset& data, int64_t batch, int64_t seq, int64_t max_batches,
                Communicator& comm = world(),
                const std::function<void(int64_t done, int64_t total)>& on_batch = nullptr);

// Trains `config` on `data` (token ids from `tokenizer`), writing into options.out_dir.
// With several ranks in `comm` (a run launched by mpirun) it trains data parallel: every rank builds the same
// model, rank r computes rows rank_rows(batch, r, size) of each batch the one-process run draws, gradients are
// averaged over the global batch (nn/data_parallel.h) and, with zero1, the optimiser state is sharded
// (nn/zero_optimizer.h). So N ranks follow the one-process run with the same --batch, to float32 rounding.
// With expert_parallel = E > 1, each group of E consecutive ranks also splits every layer's experts: a rank
// computes its n/E experts for the tokens of the whole group (nn/expert_parallel.h), the rest stays as above.
// Losses are global means; rank 0 alone writes metrics.jsonl, the progress bar and checkpoints (whose optimiser
// state is always whole: a run saved at N ranks resumes at any M). Every rank stops at the same step when any
// of them gets SIGINT/SIGTERM or runs out of time.
TrainResult train(const ModelConfig& config, const TrainOptions& options, const TokenDataset& data,
                  const Tokenizer& tokenizer, Communicator& comm = world());

}  // namespace uoe::nn
