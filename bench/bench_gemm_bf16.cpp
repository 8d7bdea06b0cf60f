// bfloat16 GEMM benchmarks: uoe::cpu::gemm_bf16 (bfloat16 operands, float32 sums, bfloat16 C as matmul writes it)
// on square matrices, on the path the process picks (BM_GemmBf16_uoe: the CPU's best, or UOE_PIN_ISA's) and on
// each path this CPU runs (BM_GemmBf16_uoe_<path>: amx, avx512_bf16, f32), back to back in one process.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/gemm_isa.h"

namespace {

using uoe::BFloat16;
using uoe::cpu::detail::Bf16Isa;

std::vector<BFloat16> random_bf16(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<BFloat16> v(static_cast<size_t>(n));
  for (auto& x : v) x = BFloat16(dist(rng));
  return v;
}

// C [n, n] = A [n, n] * B [n, n] on `path` (Auto: the process's choice), GFLOPS counted as 2n^3 per GEMM.
void run_gemm_bf16(benchmark::State& state, Bf16Isa path) {
  namespace d = uoe::cpu::detail;
  if (path != Bf16Isa::Auto && !d::gemm_bf16_force_isa(path)) {
    state.SkipWithError("this CPU cannot run the path");
    return;
  }
  const int64_t n = state.range(0);
  const auto A = random_bf16(n * n, 1), B = random_bf16(n * n, 2);
  std::vector<BFloat16> C(size_t(n * n));
  for (auto _ : state) {
    uoe::cpu::gemm_bf16<BFloat16>(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  state.SetLabel(d::bf16_isa_name(d::gemm_bf16_active_isa()));
  state.counters["GFLOPS"] = benchmark::Counter(2.0 * double(n) * double(n) * double(n) * 1e-9,
                                                benchmark::Counter::kIsIterationInvariantRate);
  d::gemm_bf16_force_isa(Bf16Isa::Auto);
}

const bool kRegistered = [] {
  std::vector<std::pair<std::string, Bf16Isa>> runs = {{"BM_GemmBf16_uoe", Bf16Isa::Auto}};
  for (Bf16Isa path : {Bf16Isa::Amx, Bf16Isa::Avx512Bf16, Bf16Isa::F32})
    if (uoe::cpu::detail::gemm_bf16_isa_supported(path))
      runs.emplace_back(std::string("BM_GemmBf16_uoe_") + uoe::cpu::detail::bf16_isa_name(path), path);
  for (const auto& [name, path] : runs)
    benchmark::RegisterBenchmark(name.c_str(), run_gemm_bf16, path)
        ->Arg(256)
        ->Arg(512)
        ->Arg(1024)
        ->Arg(2048)
        ->UseRealTime()
        ->Unit(benchmark::kMillisecond);
  return true;
}();

}  // namespace
