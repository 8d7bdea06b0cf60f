// GPU GEMM throughput through cuda::gemm (cuBLASLt): square bf16 (float32 accumulation), float32 with TF32 and
// exact float32, timed with CUDA events (manual time) and reported as TFLOP/s. Skips without a GPU.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <exception>

#include "core/rng.h"
#include "core/tensor.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"
#include "gpu_timing.h"
#include "ops/kernels/gemm.h"

namespace {

using namespace uoe;

enum class Mode { Bf16, Tf32, F32 };

void gemm_once(Mode mode, int64_t n, const Tensor& A, const Tensor& B, const Tensor& C) {
  if (mode == Mode::Bf16)
    cuda::gemm_bf16(false, false, n, n, n, 1.0f, A.data_ptr<BFloat16>(), n, B.data_ptr<BFloat16>(), n, 0.0f,
                    C.data_ptr<BFloat16>(), n);
  else
    cuda::gemm<float>(false, false, n, n, n, 1.0f, A.data_ptr<float>(), n, B.data_ptr<float>(), n, 0.0f,
                      C.data_ptr<float>(), n);
}

void run_gpu_gemm(benchmark::State& state, Mode mode) {
  if (!cuda::is_available()) {
    state.SkipWithError("no CUDA device visible (CPU-only machine): GPU benchmarks skipped");
    return;
  }
  const bool previous_tf32 = cuda::allow_tf32();
  try {
    const int64_t n = state.range(0);
    const DType dt = mode == Mode::Bf16 ? DType::BFloat16 : DType::Float32;
    const Device gpu = Device::cuda(0);
    cuda::DeviceGuard guard(0);
    cuda::set_allow_tf32(mode == Mode::Tf32);
    // Random inputs (never zeros: they hide unwritten outputs and run faster than real data); two input sets
    // alternate so that consecutive GEMMs do not find their operands in L2.
    Generator gen{uint64_t(n)};
    const Tensor A[2] = {randn({n, n}, {}, &gen).to(dt).to(gpu), randn({n, n}, {}, &gen).to(dt).to(gpu)};
    const Tensor B[2] = {randn({n, n}, {}, &gen).to(dt).to(gpu), randn({n, n}, {}, &gen).to(dt).to(gpu)};
    const Tensor C = empty({n, n}, TensorOptions{}.with_dtype(dt).with_device(gpu));
    int64_t i = 0;  // the two input sets alternate
    const double total_s =
        time_with_events(state, [&] {
          gemm_once(mode, n, A[i % 2], B[i % 2], C);
          ++i;
        }, 3);  // handle, heuristic
    const double flops = 2.0 * double(n) * double(n) * double(n) * double(state.iterations());
    state.counters["TFLOP/s"] = total_s > 0 ? flops / total_s * 1e-12 : 0.0;
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  cuda::set_allow_tf32(previous_tf32);
}

void BM_GpuGemmBf16(benchmark::State& state) { run_gpu_gemm(state, Mode::Bf16); }
void BM_GpuGemmTf32(benchmark::State& state) { run_gpu_gemm(state, Mode::Tf32); }
void BM_GpuGemmF32(benchmark::State& state) { run_gpu_gemm(state, Mode::F32); }

BENCHMARK(BM_GpuGemmBf16)->Arg(4096)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GpuGemmTf32)->Arg(4096)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GpuGemmF32)->Arg(4096)->Arg(8192)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
