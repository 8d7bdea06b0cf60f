// Fused optimiser updates on the GPU: AdamW and SGD per tensor, and AdamW over many tensors per launch.
// Arithmetic is spelled with round-to-nearest intrinsics (no FMA contraction), so that the per-tensor and the
// multi-tensor kernels give identical bits and match the CPU kernel's operation order.
#include "cuda/optimizer_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

constexpr const char* kOp = "optimizer";
constexpr int kThreads = 256;
constexpr int64_t kChunk = int64_t(1) << 16;  // elements per block in the multi-tensor kernel
constexpr int kMultiThreads = 512;
constexpr int kMaxTensors = 32;  // per launch; the argument struct stays under the classic 4 KiB limit
constexpr int kMaxBlocks = 320;

// The step's constants, computed once on the host exactly as the CPU kernel computes them.
struct AdamWConsts {
  float beta1, one_minus_beta1, beta2, one_minus_beta2, eps, step, inv_bc2;
};

AdamWConsts consts_of(const AdamWStep& s) {
  return {s.beta1, 1.0f - s.beta1, s.beta2, 1.0f - s.beta2, s.eps, s.lr / s.bias_correction1,
          1.0f / s.bias_correction2};
}

float decay_of(float lr, float weight_decay) { return 1.0f - lr * weight_decay; }

// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g g; p = p decay - step m / (sqrt(v / bc2) + eps)
__device__ __forceinline__ void adamw_one(float* p, const float* g, float* m, float* v, int64_t i, float decay,
                                          const AdamWConsts& c) {
  const float gi = g[i];
  const float mi = __fadd_rn(__fmul_rn(c.beta1, m[i]), __fmul_rn(c.one_minus_beta1, gi));
  const float vi = __fadd_rn(__fmul_rn(c.beta2, v[i]), __fmul_rn(__fmul_rn(c.one_minus_beta2, gi), gi));
  m[i] = mi;
  v[i] = vi;
  const float denom = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, c.inv_bc2)), c.eps);
  p[i] = __fsub_rn(__fmul_rn(p[i], decay), __fdiv_rn(__fmul_rn(c.step, mi), denom));
}

__global__ void adamw_kernel(float* p, const float* g, float* m, float* v, int64_t n, float decay, AdamWConsts c) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    adamw_one(p, g, m, v, i, decay, c);
}

// v = momentum v + g + wd p; p = p - lr v
__global__ void sgd_kernel(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float wd) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float vi = __fadd_rn(__fadd_rn(__fmul_rn(momentum, v[i]), g[i]), __fmul_rn(wd, p[i]));
    v[i] = vi;
    p[i] = __fsub_rn(p[i], __fmul_rn(lr, vi));
  }
}

// The tensors of one launch and, per block, which tensor and which chunk of it the block updates.
struct MultiArgs {
  float* p[kMaxTensors];
  const float* g[kMaxTensors];
  float* m[kMaxTensors];
  float* v[kMaxTensors];
  int64_t n[kMaxTensors];
  float decay[kMaxTensors];
  int32_t chunk[kMaxBlocks];
  uint8_t tensor[kMaxBlocks];
};
static_assert(sizeof(MultiArgs) + sizeof(AdamWConsts) < 4000, "kernel arguments must stay under 4 KiB");

__global__ void adamw_multi_kernel(MultiArgs args, AdamWConsts c) {
  const int t = args.tensor[blockIdx.x];
  const int64_t begin = int64_t(args.chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(args.n[t], begin + kChunk);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    adamw_one(args.p[t], args.g[t], args.m[t], args.v[t], i, args.decay[t], c);
}

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)); }

cudaStream_t stream_of_current_device() {
  int device = 0;
  UOE_CUDA_CHECK(kOp, cudaGetDevice(&device));
  return current_stream(device);
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) {
  if (n <= 0) return;
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream_of_current_device()>>>(p, g, m, v, n,
                                                                           decay_of(s.lr, s.weight_decay),
                                                                           consts_of(s));
  check_launch(kOp);
}

void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream_of_current_device()>>>(p, g, v, n, lr, momentum, weight_decay);
  check_launch(kOp);
}

void adamw_update_multi(const std::vector<AdamWTensor>& tensors, const AdamWStep& s) {
  const AdamWConsts c = consts_of(s);
  const cudaStream_t stream = stream_of_current_device();
  MultiArgs args{};
  int nt = 0, nb = 0;
  auto launch = [&] {
    adamw_multi_kernel<<<nb, kMultiThreads, 0, stream>>>(args, c);
    check_launch(kOp);
    nb = 0;
  };
  for (const AdamWTensor& t : tensors) {
    if (t.n <= 0) continue;
    const int64_t chunks = (t.n + kChunk - 1) / kChunk;
    UOE_CHECK(chunks <= INT32_MAX, "[", kOp, "] tensor of ", t.n, " elements is too large");
    args.p[nt] = t.p;
    args.g[nt] = t.g;
    args.m[nt] = t.m;
    args.v[nt] = t.v;
    args.n[nt] = t.n;
    args.decay[nt] = decay_of(s.lr, t.weight_decay);
    ++nt;
    for (int64_t ch = 0; ch < chunks; ++ch) {
      args.tensor[nb] = uint8_t(nt - 1);
      args.chunk[nb] = int32_t(ch);
      ++nb;
      const bool last_chunk = ch == chunks - 1;
      if (nb == kMaxBlocks || (last_chunk && nt == kMaxTensors)) {
        launch();
        if (last_chunk) {
          nt = 0;
        } else {
          // The tensor continues in the next launch, as its slot 0.
          args.p[0] = args.p[nt - 1];
          args.g[0] = args.g[nt - 1];
          args.m[0] = args.m[nt - 1];
          args.v[0] = args.v[nt - 1];
          args.n[0] = args.n[nt - 1];
          args.decay[0] = args.decay[nt - 1];
          nt = 1;
        }
      }
    }
  }
  if (nb > 0) launch();
}

}  // namespace uoe::cuda
