// The optimiser kernel family, one declaration list for both backends: fused AdamW and SGD-with-momentum updates
// over flat buffers, a multi-tensor AdamW, and the squared norm of a gradient. Implemented in
// ops/cpu/optimizer_kernels.cpp (host pointers) and cuda/optimizer_kernels.cu (device pointers, on
// cuda::current_stream of the current device, asynchronous); a build without CUDA links stubs that raise
// (cuda/stub/). Callers pick the backend with UOE_KERNEL (ops/backend.h). Parameters and gradients are float32, or
// bfloat16 (bfloat16 parameter storage) with the update computed in float32 and the parameter rounded back
// stochastically with the same noise on both backends (core/stochastic_round.h); optimiser state is always float32.
#pragma once
#include <cstdint>
#include <vector>

#include "core/half.h"

namespace uoe::kernels {

// One AdamW step's constants.
struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};
// Keys the stochastic rounding of bfloat16 parameters (float32 ones ignore it): the step, and the index of the
// buffer's first element in its parameter, so that a ZeRO shard rounds like the same elements of the whole tensor.
struct RoundingKey {
  uint32_t step = 0;
  int64_t first_index = 0;
};
// One parameter of a multi-tensor update: its buffers (all on one device), length and weight decay.
struct AdamWTensor {
  void* p;        // float32, or bfloat16 when bf16
  const void* g;  // the parameter's dtype
  bool bf16;
  float* m;
  float* v;
  int64_t n;
  float weight_decay;
  RoundingKey key;  // bfloat16 only
};

}  // namespace uoe::kernels

// The family's declarations, the same in both backends' namespaces.
#define UOE_OPTIMIZER_KERNELS                                                                                        \
  using kernels::AdamWStep;                                                                                          \
  using kernels::AdamWTensor;                                                                                        \
  using kernels::RoundingKey;                                                                                        \
  /* p -= lr * (m̂ / (sqrt(v̂) + eps) + wd * p), with m, v updated from g first (decoupled decay). */                  \
  void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s, RoundingKey key = {}); \
  void adamw_update(BFloat16* p, const BFloat16* g, float* m, float* v, int64_t n, const AdamWStep& s,                \
                    RoundingKey key = {});                                                                           \
  /* adamw_update over every tensor, each with its own weight decay (s.weight_decay is ignored); the same bits as    \
     adamw_update tensor by tensor. CUDA: as few launches as possible (64 Ki-element chunks, 32 tensors a launch). */ \
  void adamw_update_multi(const std::vector<AdamWTensor>& tensors, const AdamWStep& s);                              \
  /* v = momentum * v + g (+ wd * p); p -= lr * v */                                                                 \
  void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay,       \
                  RoundingKey key = {});                                                                             \
  void sgd_update(BFloat16* p, const BFloat16* g, float* v, int64_t n, float lr, float momentum, float weight_decay, \
                  RoundingKey key = {});                                                                             \
  /* *out (memory on the kernel's device) = Σ g² in float64 without a copy of g, summed in a fixed order whatever    \
     the thread count or grid (gradient clipping). */                                                                \
  void squared_norm(const float* g, int64_t n, double* out);                                                        \
  void squared_norm(const double* g, int64_t n, double* out);                                                       \
  void squared_norm(const BFloat16* g, int64_t n, double* out);

namespace uoe::cpu {
UOE_OPTIMIZER_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_OPTIMIZER_KERNELS
}  // namespace uoe::cuda

#undef UOE_OPTIMIZER_KERNELS
