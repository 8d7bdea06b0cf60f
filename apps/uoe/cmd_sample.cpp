// uoe sample: autoregressive generation from a checkpoint with temperature and top-k, seeded.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <cstdio>

#include "autograd/grad_mode.h"
#include "commands.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/checkpoint.h"
#include "nn/transformer.h"

namespace uoe::cli {

int cmd_sample(const Args& a) {
  set_threads(a.integer("threads"));
  const Device device = device_flag(a);
  const DType compute = precision_flag(a, "dtype", "the compute dtype");
  // one row: the prompt's window, then a token at a time over the cache of the whole context
  check_inference_memory(a, "sample", nn::checkpoint_config(a.required("ckpt")),
                         {.batch = 1, .seq = 0, .compute = compute, .kv_cache = true}, device);
  const TrainedModel trained = load_trained_model(a.required("ckpt"), device, compute);
  nn::LanguageModel& model = *trained.model;
  const nn::Tokenizer& tokenizer = *trained.tokenizer;
  model.eval();
  const int64_t n = a.integer("tokens"), top_k = a.integer("top-k");
  const double temperature = a.number("temperature"), top_p = a.number("top-p");
  UOE_CHECK(n >= 0, "--tokens must be >= 0, got ", n);
  UOE_CHECK(top_k >= 0, "--top-k must be >= 0 (0: every token), got ", top_k);
  UOE_CHECK(temperature >= 0, "--temperature must be >= 0 (0: greedy), got ", temperature);
  UOE_CHECK(top_p > 0 && top_p <= 1, "--top-p ", top_p, ": expected a probability mass in (0, 1]");
  Generator gen(uint64_t(a.integer("seed")));
  std::vector<int32_t> ids = tokenizer.encode(a.has("prompt") ? a.str("prompt") : "\n");
  UOE_CHECK(!ids.empty(), "--prompt must not be empty");
  NoGradGuard no_grad;
  // Keys and values of the window are cached: each new token runs alone. When the cache is full, the window
  // restarts from the last half-context tokens (positions from 0 again, as in training windows).
  nn::KvCache cache = model.new_cache();
  auto feed = [&](size_t from) {  // runs ids[from..] after the cached tokens
    const std::vector<int64_t> tokens(ids.begin() + long(from), ids.end());
    return model.forward(from_vector(tokens, {1, int64_t(tokens.size())}).to(device), &cache);
  };
  const int64_t context = model.config.context;
  Tensor out = feed(ids.size() > size_t(context) ? ids.size() - size_t(context) : 0);  // the prompt's last window
  for (int64_t i = 0; i < n; ++i) {
    const Tensor logits = out.select(1, -1).select(0, 0);  // [vocab], the last position's
    std::vector<float> l = logits.to(Device::cpu()).to(DType::Float32).to_vector<float>();
    l.resize(size_t(tokenizer.vocab_size()));  // the model's vocab may be padded past the tokenizer's ids
    int32_t next = 0;
    if (temperature == 0) {
      next = int32_t(std::max_element(l.begin(), l.end()) - l.begin());  // the first maximum, as argmax
    } else {
      // keep the top-k logits, softmax at the temperature, draw one uniform number
      if (top_k > 0 && top_k < int64_t(l.size())) {
        std::vector<float> sorted = l;
        std::nth_element(sorted.begin(), sorted.begin() + (top_k - 1), sorted.end(), std::greater<float>());
        const float kth = sorted[size_t(top_k - 1)];
        for (float& v : l) if (v < kth) v = -INFINITY;
      }
      const float mx = *std::max_element(l.begin(), l.end());
      double total = 0;
      std::vector<double> p(l.size());
      for (size_t j = 0; j < l.size(); ++j) total += p[j] = std::exp(double(l[j] - mx) / temperature);
      if (top_p < 1) {  // nucleus: the most probable tokens until their mass reaches top_p, the rest dropped
        std::vector<size_t> order(p.size());
        std::iota(order.begin(), order.end(), size_t(0));
        std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] > p[y]; });
        double kept = 0;
        size_t j = 0;
        while (j < order.size() && kept < top_p * total) kept += p[order[j++]];
        for (; j < order.size(); ++j) p[order[j]] = 0;
        total = kept;
      }
      const double u = rand({1}, {}, &gen).item<float>() * total;
      double acc = 0;
      next = int32_t(l.size() - 1);
      for (size_t j = 0; j < p.size(); ++j)
        if ((acc += p[j]) > u) { next = int32_t(j); break; }
    }
    ids.push_back(next);
    if (i + 1 == n) break;
    if (cache.length < context) {
      out = feed(ids.size() - 1);
    } else {
      cache.clear();
      out = feed(ids.size() - size_t(std::max<int64_t>(context / 2, 1)));  // context 1: the last token alone
    }
  }
  const std::string text = tokenizer.decode(std::vector<int32_t>(ids.begin(), ids.end()));
  std::fwrite(text.data(), 1, text.size(), stdout);  // every byte, NUL included
  std::fputs("\n", stdout);
  return 0;
}

}  // namespace uoe::cli
