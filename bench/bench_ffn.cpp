// FFN layer benchmarks: forward + backward of each kind (dense, MoE, AoE, UoE) at the tiny presets'
// shape (4096 tokens, d_model 256), the expert_ffn op against dense GEMMs of the same work, and one whole
// training step of each tiny preset in tokens/s.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "core/rng.h"
#include "nn/ffn.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/kernels/gemm.h"
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
    Tensor y = ffn->forward(x).y;
    y.backward(g);
    benchmark::DoNotOptimize(x.grad().raw_data());
  }
  state.SetLabel(kPresets[state.range(0)]);
  state.counters["tokens/s"] = benchmark::Counter(4096, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_FfnLayer)->DenseRange(0, 3)->Unit(benchmark::kMillisecond)->UseRealTime();

// ops::expert_ffn forward + backward at tiny-uoe's shape (4096 tokens, d 256, 8 experts of width 512, top-2), all
// neurons (r0 = 0, MoE) or the expert part [64, 512) (UoE), in GFLOPS against the same 11 GEMM shapes with all
// P = T·K pairs as one expert (dense_GFLOPS): forward H_g, H_p, O; backward recomputes H_g, H_p, then dY Wdᵀ,
// dWd, dWg, dWu and dX (two terms).
void BM_ExpertFfn(benchmark::State& state) {
  const int64_t T = 4096, d = 256, n = 8, K = 2, D = 512, r0 = state.range(0), R = D - r0, P = T * K;
  Generator g(5);
  auto param = [&](const Shape& s) { return (randn(s, {}, &g) * 0.05).detach().requires_grad_(); };
  const Tensor x = param({T, d}), wg = param({n, d, D}), wu = param({n, d, D}), wd = param({n, D, d});
  const ops::Route route = ops::topk_route(randn({T, n}, {}, &g), K, ops::RouteWeights::TopKSoftmax);
  const Tensor w = route.weights.detach().requires_grad_(), dy = randn({T, d}, {}, &g);
  for (auto _ : state) ops::expert_ffn(x, route.indices, w, wg, wu, wd, r0, D).backward(dy);
  const double flops = 11.0 * 2.0 * double(P) * double(d) * double(R);
  // X, dY: [P, d]; A, B, G: [P, R]; W: [d, R] (read as [R, d] where the GEMM wants it)
  std::vector<float> X(size_t(P * d), 0.5f), A(size_t(P * R), 0.25f), H(size_t(P * R)), O(size_t(P * d)),
      W(size_t(d * R), 0.1f), dW(size_t(d * R));
  auto gemm = [](bool ta, bool tb, int64_t M, int64_t N, int64_t Kd, const float* a, int64_t lda, const float* b,
                 int64_t ldb, float* c, int64_t ldc) { cpu::gemm<float>(ta, tb, M, N, Kd, 1, a, lda, b, ldb, 0, c, ldc); };
  double dense = 1e30;
  for (int rep = 0; rep < 3; ++rep) {  // best of 3
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < 5; ++i) gemm(false, false, P, R, d, X.data(), d, W.data(), R, H.data(), R);  // H_g, H_p (x2), dY Wdᵀ
    gemm(false, false, P, d, R, A.data(), R, W.data(), d, O.data(), d);                              // O
    gemm(true, false, R, d, P, A.data(), R, X.data(), d, dW.data(), d);                              // dWd
    for (int i = 0; i < 2; ++i) gemm(true, false, d, R, P, X.data(), d, A.data(), R, dW.data(), R);  // dWg, dWu
    for (int i = 0; i < 2; ++i) gemm(false, true, P, d, R, A.data(), R, W.data(), R, O.data(), d);   // dX
    dense = std::min(dense, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  state.SetLabel(r0 ? "UoE expert part [64, 512)" : "all 512 neurons");
  state.counters["GFLOPS"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["dense_GFLOPS"] = flops / dense * 1e-9;
}
BENCHMARK(BM_ExpertFfn)->Arg(0)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();

// A whole training step (forward, backward, clip, AdamW) at batch 16 x 256, in float32 or in bfloat16 over float32
// master weights (--dtype bf16).
void BM_TrainStep(benchmark::State& state) {
  const nn::ModelConfig c = nn::load_model_config(kPresets[state.range(0)]);
  manual_seed(0);
  nn::LanguageModel model(c);
  if (state.range(1)) model.compute_dtype = DType::BFloat16;
  nn::AdamW opt(model.named_parameters(), {});
  const Tensor ids = randint(0, c.vocab_size, {16, 256}), targets = randint(0, c.vocab_size, {16, 256});
  const std::vector<Tensor> params = model.parameters();
  for (auto _ : state) {
    model.zero_grad();
    model.loss(ids, targets).backward();
    nn::clip_grad_norm(params, 1.0);
    opt.step(1e-3);
  }
  state.SetLabel(std::string(kPresets[state.range(0)]) + (state.range(1) ? " bf16" : " f32"));
  state.counters["tokens/s"] = benchmark::Counter(16 * 256, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainStep)
    ->ArgNames({"preset", "bf16"})
    ->ArgsProduct({{0, 1, 2, 3}, {0, 1}})
    ->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace uoe
