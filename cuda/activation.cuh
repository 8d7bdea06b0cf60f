// The GPU's sigmoid and SiLU with their derivatives: the formulas of uoe::cpu::vm (ops/cpu/vec_math.h), same stable
// forms, clamps and special values, with CUDA's libm. One copy for the elementwise kernels and the experts' SwiGLU.
#pragma once
#include <cuda_runtime.h>

namespace uoe::cuda {

// x < lo ? lo : x, and the clamp, letting NaN through (comparisons with NaN are false).
template <typename T>
__device__ __forceinline__ T max_keep_nan(T x, T lo) { return x < lo ? lo : x; }
template <typename T>
__device__ __forceinline__ T clamp_keep_nan(T x, T lo, T hi) {
  const T a = x < lo ? lo : x;
  return a > hi ? hi : a;
}

// sigmoid: e = exp(-|x|); x >= 0: 1/(1+e); x < 0: e/(1+e).
__device__ __forceinline__ float sigmoid(float x) {
  const float e = expf(-fabsf(x));
  const float inv = 1.0f / (1.0f + e);
  return x >= 0.0f ? inv : e * inv;
}
__device__ __forceinline__ double sigmoid(double x) {
  const double e = exp(-fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
__device__ __forceinline__ double sigmoid_grad(double x) {
  const double e = exp(-fabs(x));
  return e / ((1.0 + e) * (1.0 + e));
}

// silu(x) = x sigma(x), x clamped below (NaN kept).
__device__ __forceinline__ float silu(float x) {
  const float xc = max_keep_nan(x, -200.0f);
  return xc * sigmoid(xc);
}
__device__ __forceinline__ double silu(double x) {
  const double xc = max_keep_nan(x, -800.0);
  return xc * sigmoid(xc);
}
// silu'(x) = sigma(x) + x sigma(x) sigma(-x)
__device__ __forceinline__ float silu_grad(float x) {
  const float xc = clamp_keep_nan(x, -200.0f, 200.0f);
  const float e = expf(-fabsf(xc));
  const float inv = 1.0f / (1.0f + e);
  const float s = xc >= 0.0f ? inv : e * inv;
  return s + xc * (e * inv * inv);
}
__device__ __forceinline__ double silu_grad(double x) {
  const double xc = clamp_keep_nan(x, -800.0, 800.0);
  return sigmoid(xc) + xc * sigmoid_grad(xc);
}

}  // namespace uoe::cuda
