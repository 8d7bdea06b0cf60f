// uoe eval: validation loss of a checkpoint in nats per token and bits per byte (--json: at full precision).
#include <cmath>
#include <cstdio>

#include "commands.h"
#include "core/error.h"
#include "core/json.h"
#include "nn/checkpoint.h"
#include "nn/trainer.h"

namespace uoe::cli {

int cmd_eval(const Args& a) {
  set_threads(a.integer("threads"));
  const std::string ckpt = a.required("ckpt");
  const nn::ModelConfig config = nn::checkpoint_config(ckpt);
  const int64_t seq = a.integer_or("seq", config.context), batch = a.integer("batch");
  const int64_t max_batches = a.integer_or("max-batches", 1 << 30);
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
  double nats = 0;
  {
    TaskProgress progress("batch");
    nats = nn::evaluate(model, dataset, batch, seq, max_batches, world(),
                        [&](int64_t done, int64_t total) { progress.update(done, total); });
  }
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
  const double bits_per_byte = nats * double(tokens_used) / (bytes * std::log(2.0));
  if (a.flag("json")) {  // every digit that reads back to the same double
    json::Value v = json::Value::object();
    v["val_loss_nats_per_token"] = nats;
    v["bits_per_byte"] = bits_per_byte;
    v["tokens"] = tokens_used;
    v["bytes"] = bytes;
    std::printf("%s\n", v.dump().c_str());
    return 0;
  }
  std::printf("val loss %.4f nats/token, %.4f bits/byte over %ld tokens (%.0f bytes)\n", nats, bits_per_byte,
              long(tokens_used), bytes);
  return 0;
}

}  // namespace uoe::cli
