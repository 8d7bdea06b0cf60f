// Peer benchmark: uoe::cpu::gemm vs OpenBLAS cblas_sgemm on square float32 matrices, plus training shapes.
// The OpenBLAS side is built when UOE_BENCH_OPENBLAS is defined (CMake does so when it finds OpenBLAS).
#include <benchmark/benchmark.h>
#include <omp.h>
#ifdef UOE_BENCH_OPENBLAS
#include <cblas.h>
#endif

#include <cstdint>
#include <random>
#include <vector>

#include "ops/kernels/gemm.h"

namespace {

std::vector<float> random_matrix(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = dist(rng);
  return v;
}

void set_flops(benchmark::State& state, int64_t M, int64_t N, int64_t K) {
  // kIsRate divides by the (real) time: total GFLOP over all iterations -> GFLOP/s.
  state.counters["GFLOPS"] = benchmark::Counter(
      2.0 * double(M) * double(N) * double(K) * 1e-9 * double(state.iterations()), benchmark::Counter::kIsRate);
}

#ifdef UOE_BENCH_OPENBLAS
void BM_Sgemm_OpenBLAS(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto A = random_matrix(n * n, 1), B = random_matrix(n * n, 2);
  std::vector<float> C(size_t(n * n), 0.0f);
  openblas_set_num_threads(omp_get_max_threads());
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(n), int(n), 1.0f, A.data(), int(n), B.data(),
                int(n), 0.0f, C.data(), int(n));
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n, n, n);
}
#endif

void BM_Gemm_uoe(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto A = random_matrix(n * n, 1), B = random_matrix(n * n, 2);
  std::vector<float> C(size_t(n * n), 0.0f);
  for (auto _ : state) {
    uoe::cpu::gemm<float>(false, false, n, n, n, 1.0f, A.data(), n, B.data(), n, 0.0f, C.data(), n);
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, n, n, n);
}

// Training shapes: args M, N, K, mode (0: Y = X*W, 1: dW = X^T*dY (trans_a), 2: dX = dY*W^T (trans_b)).
// Operand storage follows the mode: trans_a stores A as [K,M], trans_b stores B as [N,K].
template <bool kOpenBLAS>
void BM_Shape(benchmark::State& state) {
  const int64_t M = state.range(0), N = state.range(1), K = state.range(2);
  const bool ta = state.range(3) == 1, tb = state.range(3) == 2;
  const auto A = random_matrix(M * K, 1), B = random_matrix(K * N, 2);
  std::vector<float> C(size_t(M * N), 0.0f);
  const int64_t lda = ta ? M : K, ldb = tb ? K : N;
#ifdef UOE_BENCH_OPENBLAS
  if (kOpenBLAS) openblas_set_num_threads(omp_get_max_threads());
#endif
  for (auto _ : state) {
    if constexpr (kOpenBLAS) {
#ifdef UOE_BENCH_OPENBLAS
      cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N),
                  int(K), 1.0f, A.data(), int(lda), B.data(), int(ldb), 0.0f, C.data(), int(N));
#endif
    } else {
      uoe::cpu::gemm<float>(ta, tb, M, N, K, 1.0f, A.data(), lda, B.data(), ldb, 0.0f, C.data(), N);
    }
    benchmark::DoNotOptimize(C.data());
    benchmark::ClobberMemory();
  }
  set_flops(state, M, N, K);
}

void shape_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"M", "N", "K", "mode"});
  b->Args({4096, 1536, 256, 0});
  b->Args({4096, 256, 1536, 0});
  b->Args({256, 1536, 4096, 1});   // dW of a 256->1536 layer over 4096 rows: X^T [256,4096] * dY [4096,1536]
  b->Args({1536, 256, 4096, 1});   // dW of a 1536->256 layer
  b->Args({4096, 256, 1536, 2});   // dX = dY [4096,1536] * W^T, W stored [256,1536]
  b->Args({4096, 1536, 256, 2});   // dX = dY [4096,256] * W^T, W stored [1536,256]
}

}  // namespace

#ifdef UOE_BENCH_OPENBLAS
BENCHMARK(BM_Sgemm_OpenBLAS)->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(BM_Gemm_uoe)->Arg(256)->Arg(512)->Arg(1024)->Arg(2048)->UseRealTime()->Unit(benchmark::kMillisecond);
#ifdef UOE_BENCH_OPENBLAS
BENCHMARK(BM_Shape<true>)->Name("BM_Shape_OpenBLAS")->Apply(shape_args)->UseRealTime()->Unit(benchmark::kMillisecond);
#endif
BENCHMARK(BM_Shape<false>)->Name("BM_Shape_uoe")->Apply(shape_args)->UseRealTime()->Unit(benchmark::kMillisecond);
