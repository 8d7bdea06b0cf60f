// CPU kernels of the optimisers: fused AdamW and SGD-with-momentum updates over flat buffers, and the squared norm
// of a gradient. Parameters and
// gradients are float32, or bfloat16 (bfloat16 parameter storage) with the update computed in float32 and the
// parameter rounded back stochastically (core/stochastic_round.h); optimiser state is always float32.
#pragma once
#include <cstdint>

#include "core/half.h"

namespace uoe::cpu {

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
// p -= lr * (m̂ / (sqrt(v̂) + eps) + wd * p), with m, v updated from g first (decoupled decay).
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s, RoundingKey key = {});
void adamw_update(BFloat16* p, const BFloat16* g, float* m, float* v, int64_t n, const AdamWStep& s,
                  RoundingKey key = {});
// v = momentum * v + g (+ wd * p); p -= lr * v
void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key = {});
void sgd_update(BFloat16* p, const BFloat16* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key = {});
// *out = Σ g² in float64 without a copy of g, summed in a fixed order whatever the thread count (gradient
// clipping).
void squared_norm(const float* g, int64_t n, double* out);
void squared_norm(const double* g, int64_t n, double* out);
void squared_norm(const BFloat16* g, int64_t n, double* out);

}  // namespace uoe::cpu
