// GPU row-wise kernels (softmax, rms_norm forward + backward, cross entropy forward + backward) on float32
// [8192, 4096] / vocab 50304, timed with CUDA events, GB/s beside a device-to-device copy. Skips without a GPU.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <functional>
#include <memory>

#include "core/tensor.h"
#include "cuda/check.h"
#include "cuda/cuda_api.h"
#include "ops/kernels/rowwise.h"
#include "cuda/stream.h"
#include "gpu_timing.h"

namespace uoe {
namespace {

constexpr int64_t kRows = 8192, kN = 4096, kVocab = 50304;
constexpr double kF = sizeof(float);

// Random device inputs, made once (randn on the host, copied up): x, dy [kRows, kN]; weight [kN]; logits
// [kRows, kVocab] (512 random rows repeated: 100 MB of distinct data, more than the L2 cache) and targets.
struct Inputs {
  Tensor x, dy, w, y, dx, dw, rstd;
  Tensor logits, dlogits, targets, loss, lse, scale;
};
const Inputs& inputs() {
  static const std::unique_ptr<Inputs> in = [] {
    auto p = std::make_unique<Inputs>();
    const TensorOptions gpu = TensorOptions{}.with_device(Device::cuda(0));
    p->x = randn({kRows, kN}).to(Device::cuda(0));
    p->dy = randn({kRows, kN}).to(Device::cuda(0));
    p->w = randn({kN}).to(Device::cuda(0));
    p->y = empty({kRows, kN}, gpu);
    p->dx = empty({kRows, kN}, gpu);
    p->dw = empty({kN}, gpu);
    p->rstd = empty({kRows}, gpu);
    constexpr int64_t kDistinct = 512;
    const Tensor block = (randn({kDistinct, kVocab}) * 4.0).to(Device::cuda(0));
    p->logits = empty({kRows, kVocab}, gpu);
    const size_t block_bytes = size_t(kDistinct * kVocab) * sizeof(float);
    for (int64_t r = 0; r < kRows; r += kDistinct)
      UOE_CUDA_CHECK("bench", cudaMemcpy(p->logits.data_ptr<float>() + r * kVocab, block.data_ptr<float>(), block_bytes,
                                         cudaMemcpyDeviceToDevice));
    p->dlogits = empty({kRows, kVocab}, gpu);
    p->targets = randint(0, kVocab, {kRows}).to(Device::cuda(0));
    p->loss = empty({kRows}, gpu);
    p->lse = empty({kRows}, gpu);
    p->scale = full({kRows}, 1.0 / double(kRows), gpu);
    cuda::synchronize(0, "bench inputs");
    return p;
  }();
  return *in;
}

// Times body() with CUDA events on the current stream (one warm-up call first) and reports GB/s for `bytes`
// moved per call (each input read once, each output written once).
void time_gpu(benchmark::State& state, double bytes, const std::function<void()>& body) {
  if (!cuda::is_available()) {
    state.SkipWithError("no CUDA device visible");
    return;
  }
  const double seconds = time_with_events(state, body, 1);
  if (seconds > 0) state.counters["GB/s"] = bytes * double(state.iterations()) / seconds * 1e-9;
}

// The bandwidth ceiling as a plain device-to-device copy of one [8192, 4096] float32 array sees it.
void BM_GpuCopy(benchmark::State& state) {
  if (!cuda::is_available()) return state.SkipWithError("no CUDA device visible");
  const Inputs& in = inputs();
  const size_t bytes = size_t(kRows * kN) * sizeof(float);
  time_gpu(state, 2.0 * double(bytes), [&] {
    UOE_CUDA_CHECK("bench", cudaMemcpyAsync(in.y.data_ptr<float>(), in.x.data_ptr<float>(), bytes,
                                            cudaMemcpyDeviceToDevice, cuda::current_stream(0)));
  });
}

void BM_GpuSoftmax(benchmark::State& state) {
  if (!cuda::is_available()) return state.SkipWithError("no CUDA device visible");
  const Inputs& in = inputs();
  time_gpu(state, 2.0 * kF * double(kRows * kN),
           [&] { cuda::softmax_forward<float>(kRows, kN, in.x.data_ptr<float>(), in.y.data_ptr<float>()); });
}

void BM_GpuRmsNormForward(benchmark::State& state) {
  if (!cuda::is_available()) return state.SkipWithError("no CUDA device visible");
  const Inputs& in = inputs();
  time_gpu(state, kF * (2.0 * double(kRows * kN) + double(kN + kRows)), [&] {
    cuda::rms_norm_forward<float>(kRows, kN, in.x.data_ptr<float>(), in.w.data_ptr<float>(), 1e-5,
                                  in.y.data_ptr<float>(), in.rstd.data_ptr<float>());
  });
}

// dx and dweight: reads x, dy (and weight, rstd), writes dx (and dweight).
void BM_GpuRmsNormBackward(benchmark::State& state) {
  if (!cuda::is_available()) return state.SkipWithError("no CUDA device visible");
  const Inputs& in = inputs();
  time_gpu(state, kF * (3.0 * double(kRows * kN) + 2.0 * double(kN) + double(kRows)), [&] {
    cuda::rms_norm_backward<float>(kRows, kN, in.x.data_ptr<float>(), in.w.data_ptr<float>(), in.rstd.data_ptr<float>(),
                                   in.dy.data_ptr<float>(), in.dx.data_ptr<float>(), in.dw.data_ptr<float>());
  });
}

// Forward: reads the logits once (plus targets), writes loss_per_row and lse; includes the target check and its
// one device-to-host copy.
void BM_GpuCrossEntropyForward(benchmark::State& state) {
  if (!cuda::is_available()) return state.SkipWithError("no CUDA device visible");
  const Inputs& in = inputs();
  time_gpu(state, kF * double(kRows * kVocab), [&] {
    cuda::cross_entropy_forward<float>(kRows, kVocab, in.logits.data_ptr<float>(), in.targets.data_ptr<int64_t>(), -100,
                                       in.loss.data_ptr<float>(), in.lse.data_ptr<float>());
  });
}

// Backward: reads the logits, writes dlogits.
void BM_GpuCrossEntropyBackward(benchmark::State& state) {
  if (!cuda::is_available()) return state.SkipWithError("no CUDA device visible");
  const Inputs& in = inputs();
  cuda::cross_entropy_forward<float>(kRows, kVocab, in.logits.data_ptr<float>(), in.targets.data_ptr<int64_t>(), -100,
                                     in.loss.data_ptr<float>(), in.lse.data_ptr<float>());
  time_gpu(state, 2.0 * kF * double(kRows * kVocab), [&] {
    cuda::cross_entropy_backward<float>(kRows, kVocab, in.logits.data_ptr<float>(), in.targets.data_ptr<int64_t>(),
                                        -100, in.lse.data_ptr<float>(), in.scale.data_ptr<float>(),
                                        in.dlogits.data_ptr<float>());
  });
}

BENCHMARK(BM_GpuCopy)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GpuSoftmax)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GpuRmsNormForward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GpuRmsNormBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GpuCrossEntropyForward)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_GpuCrossEntropyBackward)->UseManualTime()->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace uoe
