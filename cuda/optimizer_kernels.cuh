// The CUDA optimiser kernels (launched by cuda/optimizer_kernels.cu; run on the CPU by uoe_cuda_emu_tests): AdamW
// and SGD per tensor, AdamW over many tensors per launch (and how tensors are packed into launches), and the blocks
// of the squared gradient norm. Arithmetic is spelled with round-to-nearest intrinsics (no FMA contraction), so
// that the per-tensor and the multi-tensor kernels give identical bits; bfloat16 parameters are stored back with
// the CPU's stochastic rounding (same noise).
#pragma once
#include <cuda_bf16.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/stochastic_round.h"
#include "cuda/storage_access.cuh"
#include "ops/kernels/optimizer.h"

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

// Elements are loaded into float32 with load_as (cuda/storage_access.cuh) and stored back: float32 as it is,
// bfloat16 rounded stochastically, keyed by the element's `index` in its parameter.
__device__ __forceinline__ void store(float& dst, float x, uint64_t, uint32_t) { dst = x; }
__device__ __forceinline__ void store(__nv_bfloat16& dst, float x, uint64_t index, uint32_t step) {
  const uint32_t bits = __float_as_uint(x);
  dst = __ushort_as_bfloat16(bf16_round_stochastic(bits, rounding_noise(index, step, bits)));
}

float decay_of(float lr, float weight_decay) { return 1.0f - lr * weight_decay; }

// m = b1 m + (1-b1) g; v = b2 v + (1-b2) g g; p = p decay - step m / (sqrt(v / bc2) + eps)
template <class P>
__device__ __forceinline__ void adamw_one(P* p, const P* g, float* m, float* v, int64_t i, float decay,
                                          const AdamWConsts& c, RoundingKey key) {
  const float gi = load_as<float>(g + i);
  const float mi = __fadd_rn(__fmul_rn(c.beta1, m[i]), __fmul_rn(c.one_minus_beta1, gi));
  const float vi = __fadd_rn(__fmul_rn(c.beta2, v[i]), __fmul_rn(__fmul_rn(c.one_minus_beta2, gi), gi));
  m[i] = mi;
  v[i] = vi;
  const float denom = __fadd_rn(__fsqrt_rn(__fmul_rn(vi, c.inv_bc2)), c.eps);
  store(p[i], __fsub_rn(__fmul_rn(load_as<float>(p + i), decay), __fdiv_rn(__fmul_rn(c.step, mi), denom)),
        uint64_t(key.first_index + i), key.step);
}

template <class P>
__global__ void adamw_kernel(P* p, const P* g, float* m, float* v, int64_t n, float decay, AdamWConsts c,
                             RoundingKey key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    adamw_one(p, g, m, v, i, decay, c, key);
}

// v = momentum v + g + wd p; p = p - lr v
template <class P>
__global__ void sgd_kernel(P* p, const P* g, float* v, int64_t n, float lr, float momentum, float wd,
                           RoundingKey key) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const float pi = load_as<float>(p + i);
    const float vi = __fadd_rn(__fadd_rn(__fmul_rn(momentum, v[i]), load_as<float>(g + i)), __fmul_rn(wd, pi));
    v[i] = vi;
    store(p[i], __fsub_rn(pi, __fmul_rn(lr, vi)), uint64_t(key.first_index + i), key.step);
  }
}

// The tensors of one launch and, per block, which tensor and which chunk of it the block updates.
struct MultiArgs {
  void* p[kMaxTensors];
  const void* g[kMaxTensors];
  bool bf16[kMaxTensors];
  float* m[kMaxTensors];
  float* v[kMaxTensors];
  int64_t n[kMaxTensors];
  float decay[kMaxTensors];
  RoundingKey key[kMaxTensors];
  int32_t chunk[kMaxBlocks];
  uint8_t tensor[kMaxBlocks];
};
static_assert(sizeof(MultiArgs) + sizeof(AdamWConsts) < 4000, "kernel arguments must stay under 4 KiB");

// Elements [begin, end) of tensor t of a launch, stored as P.
template <class P>
__device__ __forceinline__ void adamw_range(const MultiArgs& args, int t, int64_t begin, int64_t end,
                                            const AdamWConsts& c) {
  P* p = static_cast<P*>(args.p[t]);
  const P* g = static_cast<const P*>(args.g[t]);
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x)
    adamw_one(p, g, args.m[t], args.v[t], i, args.decay[t], c, args.key[t]);
}

__global__ void adamw_multi_kernel(MultiArgs args, AdamWConsts c) {
  const int t = args.tensor[blockIdx.x];
  const int64_t begin = int64_t(args.chunk[blockIdx.x]) * kChunk;
  const int64_t end = min(args.n[t], begin + kChunk);
  // The parameter's storage type, the same for the whole block.
  if (args.bf16[t]) adamw_range<__nv_bfloat16>(args, t, begin, end, c);
  else adamw_range<float>(args, t, begin, end, c);
}

// part[b] = Σ g[i]² over block b's range [b·per_block, (b+1)·per_block), in float64, a fixed tree per block.
template <class P>
__global__ void squares_kernel(const P* g, int64_t n, int64_t per_block, double* part) {
  __shared__ double s[kThreads];
  const int64_t begin = int64_t(blockIdx.x) * per_block, end = min(n, begin + per_block);
  double acc = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) {
    const double x = load_as<compute_t<P>>(g + i);
    acc += x * x;
  }
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = kThreads / 2; w > 0; w /= 2) {
    if (int(threadIdx.x) < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) part[blockIdx.x] = s[0];
}

// Packs the tensors' 64 Ki-element chunks into launches of at most kMaxBlocks blocks and kMaxTensors tensors, in
// order, and calls launch(args, blocks) for each; a tensor cut by the block limit continues as slot 0 of the next.
template <class Launch>
void for_each_multi_launch(const std::vector<AdamWTensor>& tensors, const AdamWStep& s, Launch&& launch) {
  MultiArgs args{};
  int nt = 0, nb = 0;
  for (const AdamWTensor& t : tensors) {
    if (t.n <= 0) continue;
    const int64_t chunks = (t.n + kChunk - 1) / kChunk;
    UOE_CHECK(chunks <= INT32_MAX, "[", kOp, "] tensor of ", t.n, " elements is too large");
    args.p[nt] = t.p;
    args.g[nt] = t.g;
    args.bf16[nt] = t.bf16;
    args.m[nt] = t.m;
    args.v[nt] = t.v;
    args.n[nt] = t.n;
    args.decay[nt] = decay_of(s.lr, t.weight_decay);
    args.key[nt] = t.key;
    ++nt;
    for (int64_t ch = 0; ch < chunks; ++ch) {
      args.tensor[nb] = uint8_t(nt - 1);
      args.chunk[nb] = int32_t(ch);
      ++nb;
      const bool last_chunk = ch == chunks - 1;
      if (nb == kMaxBlocks || (last_chunk && nt == kMaxTensors)) {
        launch(args, nb);
        nb = 0;
        if (last_chunk) {
          nt = 0;
        } else {
          // The tensor continues in the next launch, as its slot 0.
          args.p[0] = args.p[nt - 1];
          args.g[0] = args.g[nt - 1];
          args.bf16[0] = args.bf16[nt - 1];
          args.m[0] = args.m[nt - 1];
          args.v[0] = args.v[nt - 1];
          args.n[0] = args.n[nt - 1];
          args.decay[0] = args.decay[nt - 1];
          args.key[0] = args.key[nt - 1];
          nt = 1;
        }
      }
    }
  }
  if (nb > 0) launch(args, nb);
}

}  // namespace
}  // namespace uoe::cuda
