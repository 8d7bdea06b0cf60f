// Fused optimiser updates: one pass over each parameter, vectorised, split across threads by element.
#include "ops/cpu/optimizer_kernels.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/simd.h"

namespace uoe::cpu {
namespace {

constexpr int64_t kChunk = 1 << 15;

UOE_SIMD void adamw_chunk(float* p, const float* g, float* m, float* v, int64_t n, AdamWStep s) {
  const float decay = 1.0f - s.lr * s.weight_decay;
  const float step = s.lr / s.bias_correction1;
  const float inv_bc2 = 1.0f / s.bias_correction2;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * g[i];
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * g[i] * g[i];
    m[i] = mi;
    v[i] = vi;
    p[i] = p[i] * decay - step * mi / (std::sqrt(vi * inv_bc2) + s.eps);
  }
}

UOE_SIMD void sgd_chunk(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float wd) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float vi = momentum * v[i] + g[i] + wd * p[i];
    v[i] = vi;
    p[i] -= lr * vi;
  }
}

}  // namespace

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk, len = std::min(kChunk, n - b);
    adamw_chunk(p + b, g + b, m + b, v + b, len, s);
  }
}

void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t b = c * kChunk, len = std::min(kChunk, n - b);
    sgd_chunk(p + b, g + b, v + b, len, lr, momentum, weight_decay);
  }
}

}  // namespace uoe::cpu
