// uoe_bench: op benchmarks through the public API — matmul GFLOP/s, memory-bound ops against a plain copy, attention
// (float32 and bfloat16).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cstring>
#include <string>

#include "core/rng.h"
#include "ops/kernels/attention.h"
#include "ops/ops.h"

namespace uoe {
namespace {

// Square float32 matmul, both operands row-major; GFLOPS = 2 n^3 per iteration.
void BM_Matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  const Tensor a = randn({n, n}), b = randn({n, n});
  for (auto _ : state) benchmark::DoNotOptimize(ops::matmul(a, b).raw_data());
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(n * n * n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_Matmul)->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)->Unit(benchmark::kMillisecond)->UseRealTime();

constexpr int64_t kElems = int64_t(1) << 26;  // 256 MiB per float32 array: larger than the caches

void set_bandwidth(benchmark::State& state, double bytes_per_iter) {
  state.counters["GB/s"] = benchmark::Counter(bytes_per_iter * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// The machine's memory bandwidth as a plain copy sees it: memcpy split across the threads.
void BM_Copy(benchmark::State& state) {
  std::vector<float> src(size_t(kElems), 1.0f), dst(size_t(kElems), 0.0f);
  for (auto _ : state) {
#pragma omp parallel
    {
      const int64_t nt = omp_get_num_threads(), t = omp_get_thread_num();
      const int64_t chunk = (kElems + nt - 1) / nt, begin = t * chunk, end = std::min(kElems, begin + chunk);
      if (begin < end) std::memcpy(dst.data() + begin, src.data() + begin, size_t(end - begin) * sizeof(float));
    }
    benchmark::DoNotOptimize(dst.data());
  }
  set_bandwidth(state, 2.0 * kElems * sizeof(float));
}
BENCHMARK(BM_Copy)->Unit(benchmark::kMillisecond)->UseRealTime();

// The same bandwidth as a plain loop with ordinary stores sees it.
void BM_CopyLoop(benchmark::State& state) {
  std::vector<float> src(size_t(kElems), 1.0f), dst(size_t(kElems), 0.0f);
  const float* s = src.data();
  float* d = dst.data();
  for (auto _ : state) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < kElems; ++i) d[i] = s[i];
    benchmark::DoNotOptimize(dst.data());
  }
  set_bandwidth(state, 2.0 * kElems * sizeof(float));
}
BENCHMARK(BM_CopyLoop)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_Add(benchmark::State& state) {
  const Tensor a = randn({kElems}), b = randn({kElems});
  for (auto _ : state) benchmark::DoNotOptimize((a + b).raw_data());
  set_bandwidth(state, 3.0 * kElems * sizeof(float));
}
BENCHMARK(BM_Add)->Unit(benchmark::kMillisecond)->UseRealTime();

void BM_MulBroadcastRow(benchmark::State& state) {
  const Tensor a = randn({kElems / 1024, 1024}), b = randn({1024});
  for (auto _ : state) benchmark::DoNotOptimize((a * b).raw_data());
  set_bandwidth(state, 2.0 * kElems * sizeof(float));
}
BENCHMARK(BM_MulBroadcastRow)->Unit(benchmark::kMillisecond)->UseRealTime();

template <Tensor (*F)(const Tensor&)>
void BM_Unary(benchmark::State& state) {
  const Tensor a = randn({kElems});
  for (auto _ : state) benchmark::DoNotOptimize(F(a).raw_data());
  set_bandwidth(state, 2.0 * kElems * sizeof(float));
}
BENCHMARK(BM_Unary<ops::exp>)->Name("BM_Exp")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Unary<ops::silu>)->Name("BM_Silu")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_Unary<ops::tanh>)->Name("BM_Tanh")->Unit(benchmark::kMillisecond)->UseRealTime();

// Row ops over [rows, 1024] (64 Mi elements in, as many out) in float32, and in bfloat16, which the CPU kernels
// read and write as it is (half the bytes).
template <DType D>
void BM_Softmax(benchmark::State& state) {  // rows of the argument's length (1024, and GPT-2's vocabulary 50304)
  const int64_t n = state.range(0);
  const Tensor x = randn({kElems / n, n}).to(D);
  for (auto _ : state) benchmark::DoNotOptimize(ops::softmax(x, -1).raw_data());
  set_bandwidth(state, 2.0 * double(x.numel()) * double(dtype_size(D)));
}
BENCHMARK(BM_Softmax<DType::Float32>)->Name("BM_Softmax")->Arg(1024)->Arg(50304)->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_Softmax<DType::BFloat16>)->Name("BM_SoftmaxBf16")->Arg(1024)->Arg(50304)->Unit(benchmark::kMillisecond)
    ->UseRealTime();

template <DType D>
void BM_RMSNorm(benchmark::State& state) {
  const Tensor x = randn({kElems / 1024, 1024}).to(D), w = randn({1024}).to(D);
  for (auto _ : state) benchmark::DoNotOptimize(ops::rms_norm(x, w).raw_data());
  set_bandwidth(state, 2.0 * kElems * double(dtype_size(D)));
}
BENCHMARK(BM_RMSNorm<DType::Float32>)->Name("BM_RMSNorm")->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_RMSNorm<DType::BFloat16>)->Name("BM_RMSNormBf16")->Unit(benchmark::kMillisecond)->UseRealTime();

// Cross entropy over [kElems / V, V] logits, V = the argument (1024, and GPT-2's 50304); forward, or forward and
// backward (the backward reads the logits once more and writes their gradient).
template <DType D, bool kBackward>
void BM_CrossEntropy(benchmark::State& state) {
  const int64_t V = state.range(0), N = kElems / V;
  Tensor logits = randn({N, V}).to(D).requires_grad_(kBackward);
  const Tensor targets = randint(0, V, {N});
  for (auto _ : state) {
    Tensor loss = ops::cross_entropy(logits, targets);
    if constexpr (kBackward) {
      loss.backward();
      logits.set_grad(Tensor());  // a fresh gradient each time, as in training (no accumulation timed)
    }
    benchmark::DoNotOptimize(loss.raw_data());
  }
  set_bandwidth(state, (kBackward ? 3.0 : 1.0) * double(N * V) * double(dtype_size(D)));
}
BENCHMARK(BM_CrossEntropy<DType::Float32, false>)->Name("BM_CrossEntropy")->Arg(1024)->Arg(50304)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CrossEntropy<DType::BFloat16, false>)->Name("BM_CrossEntropyBf16")->Arg(1024)->Arg(50304)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CrossEntropy<DType::Float32, true>)->Name("BM_CrossEntropyFwdBwd")->Arg(1024)->Arg(50304)
    ->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_CrossEntropy<DType::BFloat16, true>)->Name("BM_CrossEntropyFwdBwdBf16")->Arg(1024)->Arg(50304)
    ->Unit(benchmark::kMillisecond)->UseRealTime();

// Causal attention forward + backward in dtype dt, q/k/v [B, H, T, Dh];
// FLOPs: forward 4 B H T^2 Dh / 2 (causal half), backward 2.5x that.
void attention_fwd_bwd(benchmark::State& state, DType dt) {
  const int64_t B = 4, H = 4, T = state.range(0), Dh = 64;
  auto input = [&] { return randn({B, H, T, Dh}).to(dt).requires_grad_(); };
  const Tensor q = input(), k = input(), v = input();
  const Tensor g = randn({B, H, T, Dh}).to(dt);
  for (auto _ : state) {
    Tensor y = ops::scaled_dot_product_attention(q, k, v, true);
    y.backward(g);
    benchmark::DoNotOptimize(q.grad().raw_data());
  }
  const double fwd = 4.0 * double(B * H * T * T * Dh) / 2;
  state.counters["GFLOPS"] = benchmark::Counter(3.5 * fwd * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}
void BM_AttentionFwdBwd(benchmark::State& state) { attention_fwd_bwd(state, DType::Float32); }
BENCHMARK(BM_AttentionFwdBwd)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();
// bfloat16 q, k, v: the label names the CPU path (avx512_bf16, or f32 under UOE_PIN_ISA=f32 / without AVX512-BF16).
void BM_AttentionFwdBwdBf16(benchmark::State& state) {
  attention_fwd_bwd(state, DType::BFloat16);
  state.SetLabel(std::string("path=") + cpu::attention_bf16_path());
}
BENCHMARK(BM_AttentionFwdBwdBf16)->Arg(256)->Arg(1024)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace uoe
