// uoe eval: validation loss of a checkpoint in nats per token and bits per byte.
#include <cmath>
#include <cstdio>

#include "args.h"
#include "commands.h"
#include "core/error.h"
#include "nn/checkpoint.h"
#include "nn/trainer.h"

namespace uoe::cli {

int cmd_eval(const std::vector<std::string>& argv) {
  const Args a(argv, {"ckpt", "data", "batch", "seq", "max-batches", "threads", "device", "dtype"},
               {"skip-memory-check"});
  set_threads(a.integer("threads", 0));
  const std::string ckpt = a.required("ckpt");
  const nn::ModelConfig config = nn::checkpoint_config(ckpt);
  const int64_t seq = a.integer("seq", config.context), batch = a.integer("batch", 8);
  const int64_t max_batches = a.integer("max-batches", 1 << 30);
  UOE_CHECK(seq >= 1 && seq <= config.context, "--seq ", seq, " must be in [1, the model context ", config.context,
            "]");
  UOE_CHECK(batch >= 1 && max_batches >= 1, "--batch and --max-batches must be >= 1, got ", batch, " and ",
            max_batches);
  const Device device = device_flag(a);
  const DType compute = precision_flag(a, "dtype", "the compute dtype");
  check_inference_memory(a, "eval", config, {.batch = batch, .seq = seq, .compute = compute}, device);
  const TrainedModel trained = load_trained_model(ckpt, device, compute);
  nn::LanguageModel& model = *trained.model;
  const nn::Tokenizer& tokenizer = *trained.tokenizer;
  const std::string data = a.required("data");
  const auto tokens = open_tokens_once(data, tokenizer, checkpoint_tokens_advice(ckpt));
  const nn::TokenDataset dataset(tokens);
  const double nats = nn::evaluate(model, dataset, batch, seq, max_batches);
  // bits per byte: the same validation tokens' total nats over their byte count (a token's bytes do not depend on
  // its neighbours, so the batches are decoded one at a time)
  int64_t tokens_used = 0;
  double bytes = 0;
  for (int64_t k = 0, n = dataset.val_batch_count(batch, seq, max_batches); k < n; ++k) {
    std::vector<int32_t> ids;
    for (int64_t v : dataset.val_batch(k, batch, seq).y.to_vector<int64_t>()) ids.push_back(int32_t(v));
    tokens_used += int64_t(ids.size());
    bytes += double(tokenizer.decode(ids).size());
  }
  std::printf("val loss %.4f nats/token, %.4f bits/byte over %ld tokens (%.0f bytes)\n", nats,
              nats * double(tokens_used) / (bytes * std::log(2.0)), long(tokens_used), bytes);
  return 0;
}

}  // namespace uoe::cli
