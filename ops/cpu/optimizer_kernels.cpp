// Fused optimiser updates: one pass over each parameter, vectorised, split across threads by element; float32 or
// bfloat16 parameters (rounded back stochastically).
#include <omp.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "core/stochastic_round.h"
#include "ops/cpu/simd.h"
#include "ops/kernels/optimizer.h"

namespace uoe::cpu {
namespace {

constexpr int64_t kChunk = 1 << 15;

// A parameter element in float32 arithmetic, and back into its storage type (element `index` of its parameter).
inline float load(float x) { return x; }
inline float load(BFloat16 x) { return float(x); }
inline double load(double x) { return x; }
inline void store(float& dst, float x, uint64_t, uint32_t) { dst = x; }
inline void store(BFloat16& dst, float x, uint64_t index, uint32_t step) {
  const uint32_t bits = std::bit_cast<uint32_t>(x);
  dst = BFloat16::from_bits(bf16_round_stochastic(bits, rounding_noise(index, step, bits)));
}

template <class P>
UOE_SIMD void adamw_chunk(P* p, const P* g, float* m, float* v, int64_t n, AdamWStep s, uint64_t first,
                          uint32_t step_key) {
  const float decay = 1.0f - s.lr * s.weight_decay;
  const float step = s.lr / s.bias_correction1;
  const float inv_bc2 = 1.0f / s.bias_correction2;
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float gi = load(g[i]);
    const float mi = s.beta1 * m[i] + (1.0f - s.beta1) * gi;
    const float vi = s.beta2 * v[i] + (1.0f - s.beta2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    store(p[i], load(p[i]) * decay - step * mi / (std::sqrt(vi * inv_bc2) + s.eps), first + uint64_t(i), step_key);
  }
}

template <class P>
UOE_SIMD void sgd_chunk(P* p, const P* g, float* v, int64_t n, float lr, float momentum, float wd, uint64_t first,
                        uint32_t step_key) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) {
    const float pi = load(p[i]);
    const float vi = momentum * v[i] + load(g[i]) + wd * pi;
    v[i] = vi;
    store(p[i], pi - lr * vi, first + uint64_t(i), step_key);
  }
}

// body(begin, length) over chunks of n elements, split across threads.
template <class Body>
void for_chunks(int64_t n, const Body& body) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static) if (chunks > 1 && !omp_in_parallel())
  for (int64_t c = 0; c < chunks; ++c) body(c * kChunk, std::min(kChunk, n - c * kChunk));
}

template <class P>
void adamw(P* p, const P* g, float* m, float* v, int64_t n, const AdamWStep& s, RoundingKey key) {
  for_chunks(n, [&](int64_t b, int64_t len) {
    adamw_chunk(p + b, g + b, m + b, v + b, len, s, uint64_t(key.first_index + b), key.step);
  });
}

template <class P>
void sgd(P* p, const P* g, float* v, int64_t n, float lr, float momentum, float wd, RoundingKey key) {
  for_chunks(n, [&](int64_t b, int64_t len) {
    sgd_chunk(p + b, g + b, v + b, len, lr, momentum, wd, uint64_t(key.first_index + b), key.step);
  });
}

template <class P>
double sum_squares(const P* g, int64_t n) {
  const int64_t chunks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(static_cast<size_t>(chunks));
  for_chunks(n, [&](int64_t b, int64_t len) { part[size_t(b / kChunk)] = sum_of_squares(g + b, len); });
  double total = 0;
  for (double v : part) total += v;
  return total;
}

}  // namespace

void squared_norm(const float* g, int64_t n, double* out) { *out = sum_squares(g, n); }
void squared_norm(const double* g, int64_t n, double* out) { *out = sum_squares(g, n); }
void squared_norm(const BFloat16* g, int64_t n, double* out) { *out = sum_squares(g, n); }

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s, RoundingKey key) {
  adamw(p, g, m, v, n, s, key);
}
void adamw_update(BFloat16* p, const BFloat16* g, float* m, float* v, int64_t n, const AdamWStep& s,
                  RoundingKey key) {
  adamw(p, g, m, v, n, s, key);
}
void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key) {
  sgd(p, g, v, n, lr, momentum, weight_decay, key);
}
void sgd_update(BFloat16* p, const BFloat16* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key) {
  sgd(p, g, v, n, lr, momentum, weight_decay, key);
}

void adamw_update_multi(const std::vector<AdamWTensor>& tensors, const AdamWStep& s) {
  for (const AdamWTensor& t : tensors) {
    AdamWStep own = s;
    own.weight_decay = t.weight_decay;
    if (t.bf16)
      adamw_update(static_cast<BFloat16*>(t.p), static_cast<const BFloat16*>(t.g), t.m, t.v, t.n, own, t.key);
    else
      adamw_update(static_cast<float*>(t.p), static_cast<const float*>(t.g), t.m, t.v, t.n, own, t.key);
  }
}

}  // namespace uoe::cpu
