// Generation with a key/value cache equals the full forward: the prompt at once, then one token at a time, for
// every FFN kind with grouped-query attention (float64); greedy decoding picks the same tokens; misuse is an error.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/rng.h"
#include "fixtures.h"
#include "gradcheck.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

LanguageModel micro_model(FfnKind kind) {
  manual_seed(11);
  LanguageModel model(test::micro_config(kind));
  model.to(DType::Float64);
  model.eval();
  return model;
}

TEST(KvCache, CachedForwardEqualsTheFullForwardForEveryKind) {
  for (FfnKind kind : {FfnKind::Dense, FfnKind::MoE, FfnKind::AoE, FfnKind::UoE}) {
    LanguageModel model = micro_model(kind);
    const int64_t B = 2, T = 20, prompt = 7, V = model.config.vocab_size;
    const Tensor ids = randint(0, V, {B, T});
    NoGradGuard no_grad;
    const Tensor full = model.forward(ids);  // [B, T, V]
    KvCache cache = model.new_cache();
    const std::string what = ffn_kind_name(kind);
    EXPECT_LT(testing::max_abs_diff(model.forward(ids.narrow(1, 0, prompt), &cache), full.narrow(1, 0, prompt)), 1e-10)
        << what << ": the prompt";
    for (int64_t t = prompt; t < T; ++t)
      EXPECT_LT(testing::max_abs_diff(model.forward(ids.narrow(1, t, 1), &cache), full.narrow(1, t, 1)), 1e-10)
          << what << ": token " << t;
    EXPECT_EQ(cache.length, T);
  }
}

TEST(KvCache, GreedyDecodingPicksTheSameTokens) {
  LanguageModel model = micro_model(FfnKind::UoE);
  NoGradGuard no_grad;
  const std::vector<int64_t> prompt = {3, 1, 4, 1, 5};
  auto last_argmax = [](const Tensor& logits) {  // [1, T, V] -> the last position's argmax
    return ops::argmax(logits.select(1, -1).select(0, 0), 0).item<int64_t>();
  };
  std::vector<int64_t> plain = prompt, cached = prompt;
  KvCache cache = model.new_cache();
  int64_t next = last_argmax(model.forward(from_vector(prompt, {1, int64_t(prompt.size())}), &cache));
  for (int i = 0; i < 12; ++i) {
    plain.push_back(last_argmax(model.forward(from_vector(plain, {1, int64_t(plain.size())}))));
    cached.push_back(next);
    next = last_argmax(model.forward(from_vector(std::vector<int64_t>{next}, {1, 1}), &cache));
  }
  EXPECT_EQ(cached, plain);
}

TEST(KvCache, MisuseIsAnError) {
  LanguageModel model = micro_model(FfnKind::MoE);
  const int64_t C = model.config.context;
  KvCache cache = model.new_cache();
  testing::expect_error([&] { model.forward(randint(0, 8, {1, 4}), &cache); }, {"[model]", "inference"});
  NoGradGuard no_grad;
  model.forward(randint(0, 8, {1, 4}), &cache);
  testing::expect_error([&] { model.forward(randint(0, 8, {1, 2}), &cache); },
                     {"[attention]", "one token", "2 tokens at position 4"});
  for (int64_t t = 4; t < C; ++t) model.forward(randint(0, 8, {1, 1}), &cache);
  testing::expect_error([&] { model.forward(randint(0, 8, {1, 1}), &cache); },
                     {"[attention] the cache holds " + std::to_string(C) + " positions"});
  KvCache other;  // not from new_cache()
  testing::expect_error([&] { model.forward(randint(0, 8, {1, 1}), &other); }, {"new_cache"});
}

}  // namespace
}  // namespace uoe::nn
