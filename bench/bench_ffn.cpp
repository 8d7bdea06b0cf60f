// FFN layer benchmarks: forward + backward of each kind (dense, MoE, AoE, UoE) at the tiny presets'
// shape (4096 tokens, d_model 256), and one whole training step of each tiny preset in tokens/s.
#include <benchmark/benchmark.h>

#include "core/rng.h"
#include "nn/ffn.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace uoe {
namespace {

const char* kPresets[] = {"tiny-dense", "tiny-moe", "tiny-aoe", "tiny-uoe"};

// One FFN layer, x [4096, 256] -> y, then backward from a fixed gradient.
void BM_FfnLayer(benchmark::State& state) {
  const nn::ModelConfig c = nn::load_model_config(kPresets[state.range(0)]);
  manual_seed(0);
  auto ffn = nn::make_ffn(c, 0.02);
  const Tensor x = randn({4096, c.d_model}).requires_grad_();
  const Tensor g = randn({4096, c.d_model});
  for (auto _ : state) {
    Tensor y = ffn->forward(x);
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data());
  }
  state.SetLabel(kPresets[state.range(0)]);
  state.counters["tokens/s"] = benchmark::Counter(4096, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FfnLayer)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// A whole training step (forward, backward, clip, AdamW) at batch 16 x 256.
void BM_TrainStep(benchmark::State& state) {
  const nn::ModelConfig c = nn::load_model_config(kPresets[state.range(0)]);
  manual_seed(0);
  nn::LanguageModel model(c);
  nn::AdamW opt(model.named_parameters(), {});
  const Tensor ids = randint(0, c.vocab_size, {16, 256}), targets = randint(0, c.vocab_size, {16, 256});
  const std::vector<Tensor> params = model.parameters();
  for (auto _ : state) {
    model.zero_grad();
    model.loss(ids, targets).backward();
    nn::clip_grad_norm(params, 1.0);
    opt.step(1e-3);
  }
  state.SetLabel(kPresets[state.range(0)]);
  state.counters["tokens/s"] = benchmark::Counter(16 * 256, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainStep)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace uoe
