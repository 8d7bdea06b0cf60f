// CPU kernels of the optimisers: fused AdamW and SGD-with-momentum updates over flat float32 buffers.
#pragma once
#include <cstdint>

namespace uoe::cpu {

struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay;
  float bias_correction1, bias_correction2;  // 1 - beta^t
};
// p -= lr * (m̂ / (sqrt(v̂) + eps) + wd * p), with m, v updated from g first (decoupled decay).
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s);
// v = momentum * v + g (+ wd * p); p -= lr * v
void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay);

}  // namespace uoe::cpu
