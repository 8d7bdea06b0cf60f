// GPU training step of the small-* presets (~124M active parameters, context 1024): tokens/s and MFU, the model
// FLOPs (3 × forward, nn::count_model) over the H100/H200 dense bf16 peak of 989 TFLOP/s. bf16 compute over
// float32 master weights, AdamW. Skips without a GPU.
#include <benchmark/benchmark.h>

#include "core/rng.h"
#include "cuda/cuda_api.h"
#include "gpu_timing.h"
#include "nn/accounting.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace uoe {
namespace {

const char* const kPresets[] = {"small-dense", "small-moe", "small-aoe", "small-uoe"};
constexpr double kPeakBf16 = 989e12;

void BM_GpuTrainStep(benchmark::State& state) {
  if (!cuda::is_available()) {
    state.SkipWithError("no CUDA device visible");
    return;
  }
  const nn::ModelConfig c = nn::load_model_config(kPresets[state.range(0)]);
  const int64_t B = state.range(1), T = c.context;
  manual_seed(0);
  nn::LanguageModel model(c);
  model.to(Device::cuda(0));
  model.compute_dtype = DType::BFloat16;
  nn::AdamW opt(model.named_parameters(), {});
  const bool previous_tf32 = ops::allow_tf32();
  ops::set_allow_tf32(true);  // as nn::train on a GPU: the float32 router GEMMs on TF32
  const TensorOptions i64 = TensorOptions{}.with_dtype(DType::Int64);
  const Tensor ids = randint(0, 256, {B, T}, i64).to(Device::cuda(0));
  const Tensor targets = randint(0, 256, {B, T}, i64).to(Device::cuda(0));
  const std::vector<Tensor> params = model.parameters();
  auto step = [&] {
    model.zero_grad();
    model.loss(ids, targets).backward();
    nn::clip_grad_norm(params, 1.0);
    opt.step(1e-4);
  };
  time_with_events(state, step, 1);  // warm-up: allocator pools, cuBLASLt heuristics
  ops::set_allow_tf32(previous_tf32);
  const double tokens = double(B * T), flops = 3 * nn::count_model(c).flops * tokens;
  state.SetLabel(kPresets[state.range(0)]);
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["MFU"] = benchmark::Counter(flops / kPeakBf16, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_GpuTrainStep)->ArgsProduct({{0, 1, 2, 3}, {16}})->Unit(benchmark::kMillisecond)->UseManualTime()->Iterations(10);

}  // namespace
}  // namespace uoe
