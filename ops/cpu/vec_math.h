// uoe::cpu::vm: branch-free, libm-free float exp/log/tanh/sigmoid/silu/gelu/erf + derivatives (vectorise in omp simd).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

// Functions (float: vectorisable, below; double: std:: based, at the end):
//   exp, exp_ftz (x <= 88, flushes results < FLT_MIN to 0; cheaper, used by softmax), log (x > 0),
//   tanh, sigmoid, silu, softplus, gelu (tanh approximation), gelu_erf (exact), erf, erfc,
//   derivatives of the input x: tanh_grad, sigmoid_grad, silu_grad, gelu_grad, gelu_erf_grad,
//   derivatives from the output y: tanh_grad_from_output (1 - y^2), sigmoid_grad_from_output (y (1 - y)).
//
// Every function is always_inline so that it is inlined (and vectorised with the caller's ISA) inside
// target_clones kernels; nothing here calls libm for float, and data-dependent choices are bit-mask selects
// of values that are both computed (detail::select), which vectorise on SSE2, AVX2 and AVX-512 alike.
// Polynomials are this file's own near-minimax (Chebyshev) fits, coefficients rounded to float.
//
// Accuracy (float vs double std::, every 997th float bit pattern, tests/ops/cpu/test_vec_math.cpp; measured worst):
//   exp      relative 8.5e-8 for normal results (bound 2e-7); denormal results within 1 denormal ulp;
//            0 for x < -103.97 and -inf, +inf for x > 88.72, NaN -> NaN.
//   log      relative 1.7e-7 (x > 0, denormals included); log(0) = -inf, log(x < 0) = NaN, log(inf) = inf.
//   tanh 1.5e-7, sigmoid 1.9e-7, silu 2.1e-7 relative; tanh_grad, sigmoid_grad 2.8e-7 relative; accurate in the
//            tails (no 1 - (1 - tiny) cancellation): sigmoid(-100) is the denormal exp(-100), not 0.
//   erf      absolute 7.3e-8; erfc relative ~1e-7 near 0, growing like z^2 * 6e-8 in the tail (rounding of z*z).
//   gelu, gelu_erf: relative ~2e-7 except in the far negative tail, where the float rounding of the argument of
//            exp costs ~|v| ulps (1.6e-6 relative at x = -4.5); silu_grad, gelu_grad, gelu_erf_grad: absolute
//            <= 2e-7 around their zero crossings, relative elsewhere. +-inf give the limits (e.g. gelu(-inf) = 0).
// Double overloads use std:: functions with the same stable formulas; they are the reference / fallback.

#define UOE_VM_INLINE inline __attribute__((always_inline))

namespace uoe::cpu::vm {

namespace detail {
UOE_VM_INLINE float abs_bits(float x) { return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0x7fffffffu); }
// |r| with the sign of s (r must be >= 0 or NaN).
UOE_VM_INLINE float with_sign_of(float r, float s) {
  return std::bit_cast<float>(std::bit_cast<uint32_t>(r) | (std::bit_cast<uint32_t>(s) & 0x80000000u));
}
// c ? a : b as a bit-mask blend. A plain `?:` lets GCC sink the arms into branches (or thread constant arms
// through later arithmetic), which if-conversion then refuses under the default -ftrapping-math unless the
// target has AVX-512 masking; the mask form vectorises on SSE2/AVX2 too.
UOE_VM_INLINE float select(bool c, float a, float b) {
  const uint32_t m = 0u - static_cast<uint32_t>(c);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}
// max(x, lo) / clamp that let NaN through (comparisons with NaN are false, so x is kept).
UOE_VM_INLINE float max_keep_nan(float x, float lo) { return select(x < lo, lo, x); }
UOE_VM_INLINE float clamp_keep_nan(float x, float lo, float hi) {
  const float a = select(x < lo, lo, x);
  return select(a > hi, hi, a);
}
}  // namespace detail

// ---------------------------------------------------------------------------------------------------
// exp: x = n*ln2 + r, |r| <= ln2/2 (Cody–Waite split of ln2), e^r = 1 + r + r^2*q(r) with a degree-4
// near-minimax q (Chebyshev fit, |error| < 1e-8 relative), result = p * 2^n1 * 2^n2 with n1 + n2 = n so
// that 2^n for n in [-150, 144] never leaves the normal range and denormal results round once.
UOE_VM_INLINE float exp(float x) {
  const float xc = detail::clamp_keep_nan(x, -104.0f, 100.0f);
  const float shifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer held in the low bits
  const float t = xc * 1.44269504089f + shifter;
  const float nf = t - shifter;
  float r = xc - nf * 0.693359375f;   // ln2_hi: 9 significant bits, n*ln2_hi is exact
  r = r - nf * -2.12194440e-4f;       // ln2_lo
  float q = 1.392617589e-03f;
  q = q * r + 8.363173343e-03f;
  q = q * r + 4.166655615e-02f;
  q = q * r + 1.666657776e-01f;
  q = q * r + 5.000000000e-01f;
  const float p = (r * r * q + r) + 1.0f;
  // a = n + 254 (n in [-150, 144]); biased exponents e1 = floor(a/2) = n1 + 127, e2 = a - e1 = n2 + 127.
  // (Unsigned arithmetic: wraps harmlessly for NaN inputs, whose result is NaN anyway.)
  const uint32_t a = std::bit_cast<uint32_t>(t) - (std::bit_cast<uint32_t>(shifter) - 254u);
  const uint32_t e1 = a >> 1;
  const float s1 = std::bit_cast<float>(e1 << 23);
  const float s2 = std::bit_cast<float>((a - e1) << 23);
  return p * s1 * s2;
}

// exp for arguments x <= 88 whose results below FLT_MIN may be flushed to zero (softmax / log-sum-exp, where
// x - max <= 0): same polynomial and accuracy as exp for x in [-87.33, 88], exactly 0 below -87.33 (and for
// -inf), NaN -> NaN; x in (88, 88.72] wrongly overflows to inf, so keep to the stated domain. ~20% cheaper than
// exp (no clamping, one exponent scale).
UOE_VM_INLINE float exp_ftz(float x) {
  const float shifter = 12582912.0f;
  const float t = x * 1.44269504089f + shifter;
  const float nf = t - shifter;
  float r = x - nf * 0.693359375f;
  r = r - nf * -2.12194440e-4f;
  float q = 1.392617589e-03f;
  q = q * r + 8.363173343e-03f;
  q = q * r + 4.166655615e-02f;
  q = q * r + 1.666657776e-01f;
  q = q * r + 5.000000000e-01f;
  const float p = (r * r * q + r) + 1.0f;
  const float s = std::bit_cast<float>((std::bit_cast<uint32_t>(t) - (std::bit_cast<uint32_t>(shifter) - 127u)) << 23);
  return detail::select(x < -87.3365479f, 0.0f, p * s);
}

// log: x = m * 2^e with m in [sqrt(1/2), sqrt(2)); s = (m-1)/(m+1); log m = 2 atanh(s) = 2s + s^3 P(s^2)
// with a degree-2 near-minimax P (|error| < 3e-9). Denormal inputs are pre-scaled by 2^23.
UOE_VM_INLINE float log(float x) {
  const bool tiny = x < 1.17549435e-38f;
  const float xs = detail::select(tiny, x * 8388608.0f, x);
  const uint32_t bits = std::bit_cast<uint32_t>(xs);
  int32_t e = static_cast<int32_t>((bits >> 23) & 0xffu) - 127 - (23 & -static_cast<int32_t>(tiny));
  float m = std::bit_cast<float>((bits & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  const bool big = m > 1.41421356f;
  m = detail::select(big, m * 0.5f, m);
  e += static_cast<int32_t>(big);
  const float f = m - 1.0f;  // exact (Sterbenz)
  const float s = f / (m + 1.0f);
  const float w = s * s;
  float pl = 2.957994938e-01f;
  pl = pl * w + 3.998878002e-01f;
  pl = pl * w + 6.666668653e-01f;
  const float logm = (s * w) * pl + (s + s);
  const float ef = static_cast<float>(e);
  float res = ef * 0.693359375f + (logm + ef * -2.12194440e-4f);
  res = detail::select(x == std::numeric_limits<float>::infinity(), x, res);
  res = detail::select(x == 0.0f, -std::numeric_limits<float>::infinity(), res);
  res = detail::select(!(x >= 0.0f), std::numeric_limits<float>::quiet_NaN(), res);
  return res;
}

// tanh: |x| < 0.625: x + x^3 q(x^2) (degree-4 near-minimax q, < 2e-8 relative);
// otherwise (1 - e) / (1 + e) with e = exp(-2|x|) (no overflow, 1 for large |x|). Sign restored by bits.
UOE_VM_INLINE float tanh(float x) {
  const float ax = detail::abs_bits(x);
  const float w = ax * ax;
  float q = -6.096714176e-03f;
  q = q * w + 2.099717967e-02f;
  q = q * w + -5.385090783e-02f;
  q = q * w + 1.333276927e-01f;
  q = q * w + -3.333332837e-01f;
  const float small = (ax * w) * q + ax;
  const float e = vm::exp(-2.0f * ax);
  const float large = (1.0f - e) / (1.0f + e);
  const float r = detail::select(ax < 0.625f, small, large);
  return detail::with_sign_of(r, x);
}

// d tanh / dx = 1 - tanh^2 = 4e / (1 + e)^2, e = exp(-2|x|) (accurate for large |x|).
UOE_VM_INLINE float tanh_grad(float x) {
  const float e = vm::exp(-2.0f * detail::abs_bits(x));
  const float d = 1.0f + e;
  return (4.0f * e) / (d * d);
}
// Same derivative from the output y = tanh(x) (cheap form for autograd when only y is kept).
UOE_VM_INLINE float tanh_grad_from_output(float y) { return 1.0f - y * y; }

// sigmoid: e = exp(-|x|) in (0, 1]; x >= 0: 1/(1+e); x < 0: e/(1+e) (keeps relative accuracy for x << 0).
UOE_VM_INLINE float sigmoid(float x) {
  const float e = vm::exp(-detail::abs_bits(x));
  const float inv = 1.0f / (1.0f + e);
  return detail::select(x >= 0.0f, inv, e * inv);
}
// sigma'(x) = sigma(x) sigma(-x) = e / (1 + e)^2, e = exp(-|x|).
UOE_VM_INLINE float sigmoid_grad(float x) {
  const float e = vm::exp(-detail::abs_bits(x));
  const float d = 1.0f + e;
  return e / (d * d);
}
UOE_VM_INLINE float sigmoid_grad_from_output(float y) { return y * (1.0f - y); }

// silu(x) = x sigma(x). x is clamped to [-200, 200] (NaN kept) so that +-inf give inf / 0, not NaN.
UOE_VM_INLINE float silu(float x) {
  const float xc = detail::max_keep_nan(x, -200.0f);
  return xc * vm::sigmoid(xc);
}
// softplus(x) = log(1 + exp(x)) = max(x, 0) + log1p(e), e = exp(-|x|) in [0, 1], with log1p(e) = log(u) e / (u - 1),
// u = 1 + e rounded (Goldberg: a few ulp), and e itself where u rounds to 1. +-inf give inf / 0, NaN stays NaN.
UOE_VM_INLINE float softplus(float x) {
  const float e = vm::exp(-detail::abs_bits(x));
  const float u = 1.0f + e, d = u - 1.0f;
  const float log1p_e = detail::select(d == 0.0f, e, vm::log(u) * (e / d));
  return detail::max_keep_nan(x, 0.0f) + log1p_e;
}
// silu'(x) = sigma(x) + x sigma(x) sigma(-x).
UOE_VM_INLINE float silu_grad(float x) {
  const float xc = detail::clamp_keep_nan(x, -200.0f, 200.0f);
  const float e = vm::exp(-detail::abs_bits(xc));
  const float inv = 1.0f / (1.0f + e);
  const float s = detail::select(xc >= 0.0f, inv, e * inv);
  return s + xc * (e * inv * inv);
}
// silu(x) and silu'(x) together, bit for bit what silu and silu_grad return, for one exp and one division: silu's
// clamp xc and silu_grad's xg differ only above 200, where sigmoid is 1 for both.
UOE_VM_INLINE void silu_and_grad(float x, float& y, float& dy) {
  const float xc = detail::max_keep_nan(x, -200.0f);
  const float xg = detail::select(xc > 200.0f, 200.0f, xc);
  const float e = vm::exp(-detail::abs_bits(xg));
  const float inv = 1.0f / (1.0f + e);
  const float s = detail::select(xg >= 0.0f, inv, e * inv);
  y = xc * s;
  dy = s + xg * (e * inv * inv);
}

// gelu, tanh approximation (PyTorch gelu(approximate='tanh')):
//   0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3)  ==  x * sigma(2u)   (exact identity, no cancellation).
// v = 2u = x (c1 + c2 x^2). x below -20 gives -0 (the true value underflows long before).
UOE_VM_INLINE float gelu(float x) {
  const float xc = detail::max_keep_nan(x, -20.0f);
  const float v = xc * (1.59576912161f + 0.0713548162726f * (xc * xc));
  return xc * vm::sigmoid(v);
}
// gelu'(x) = sigma(v) + x sigma'(v) v',  v' = c1 + 3 c2 x^2.
UOE_VM_INLINE float gelu_grad(float x) {
  const float xc = detail::clamp_keep_nan(x, -20.0f, 20.0f);
  const float x2 = xc * xc;
  const float v = xc * (1.59576912161f + 0.0713548162726f * x2);
  const float dv = 1.59576912161f + 0.214064448818f * x2;
  const float e = vm::exp(-detail::abs_bits(v));
  const float inv = 1.0f / (1.0f + e);
  const float s = detail::select(v >= 0.0f, inv, e * inv);
  return s + xc * (e * inv * inv) * dv;
}

// erf / erfc. |z| < 1: erf(z) = z + z P(z^2), degree-6 near-minimax P (|error| < 1e-8).
// |z| >= 1: erfc(|z|) = exp(-z^2) Q(t), t = 1/(1 + |z|/2), degree-9 near-minimax Q fitted on |z| in [0.9, 10]
// (relative error < 3e-8 before the exp).
namespace detail {
UOE_VM_INLINE float erf_small(float z) {  // valid for |z| <= 1
  const float w = z * z;
  float p = 7.875874871e-05f;
  p = p * w + -8.016864303e-04f;
  p = p * w + 5.189087242e-03f;
  p = p * w + -2.685421146e-02f;
  p = p * w + 1.128359437e-01f;
  p = p * w + -3.761262596e-01f;
  p = p * w + 1.283791661e-01f;  // 2/sqrt(pi) - 1: the leading 1 is added exactly below
  return z * p + z;
}
UOE_VM_INLINE float erfc_large(float az) {  // az = |z| >= 1 (also fine for inf)
  const float t = 1.0f / (1.0f + 0.5f * az);
  float q = -7.512132823e-02f;
  q = q * t + 3.549670577e-01f;
  q = q * t + -6.188916564e-01f;
  q = q * t + 4.155566096e-01f;
  q = q * t + -1.145776063e-01f;
  q = q * t + 2.383017242e-01f;
  q = q * t + 2.340074927e-01f;
  q = q * t + 2.837840617e-01f;
  q = q * t + 2.819666266e-01f;
  q = q * t + 4.256562988e-06f;
  return vm::exp(-(az * az)) * q;
}
// Normal CDF Phi(x) = erfc(-x/sqrt2)/2, relative accuracy kept for x << 0.
UOE_VM_INLINE float normal_cdf(float x) {
  const float z = x * 0.707106781187f;
  const float az = abs_bits(z);
  const float small = 0.5f + 0.5f * erf_small(z);
  const float c = 0.5f * erfc_large(az);
  const float large = detail::select(x < 0.0f, c, 1.0f - c);
  return detail::select(az < 1.0f, small, large);
}
}  // namespace detail

UOE_VM_INLINE float erf(float z) {
  const float az = detail::abs_bits(z);
  const float large = detail::with_sign_of(1.0f - detail::erfc_large(az), z);
  return detail::select(az < 1.0f, detail::erf_small(z), large);
}
UOE_VM_INLINE float erfc(float z) {
  const float az = detail::abs_bits(z);
  const float c = detail::erfc_large(az);
  const float large = detail::select(z < 0.0f, 2.0f - c, c);
  return detail::select(az < 1.0f, 1.0f - detail::erf_small(z), large);
}

// Exact gelu: x Phi(x) (PyTorch gelu(approximate='none')). x below -20 gives -0.
UOE_VM_INLINE float gelu_erf(float x) {
  const float xc = detail::max_keep_nan(x, -20.0f);
  return xc * detail::normal_cdf(xc);
}
// d/dx x Phi(x) = Phi(x) + x phi(x), phi(x) = exp(-x^2/2) / sqrt(2 pi).
UOE_VM_INLINE float gelu_erf_grad(float x) {
  const float xc = detail::clamp_keep_nan(x, -20.0f, 20.0f);
  const float pdf = 0.398942280401f * vm::exp(-0.5f * (xc * xc));
  return detail::normal_cdf(xc) + xc * pdf;
}

// ---------------------------------------------------------------------------------------------------
// double: std:: functions, same stable formulas (not required to vectorise).
UOE_VM_INLINE double exp(double x) { return std::exp(x); }
UOE_VM_INLINE double exp_ftz(double x) { return std::exp(x); }
UOE_VM_INLINE double log(double x) { return std::log(x); }
UOE_VM_INLINE double tanh(double x) { return std::tanh(x); }
UOE_VM_INLINE double erf(double x) { return std::erf(x); }
UOE_VM_INLINE double erfc(double x) { return std::erfc(x); }
UOE_VM_INLINE double tanh_grad(double x) {
  const double e = std::exp(-2.0 * std::fabs(x));
  return 4.0 * e / ((1.0 + e) * (1.0 + e));
}
UOE_VM_INLINE double tanh_grad_from_output(double y) { return 1.0 - y * y; }
UOE_VM_INLINE double sigmoid(double x) {
  const double e = std::exp(-std::fabs(x));
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}
UOE_VM_INLINE double sigmoid_grad(double x) {
  const double e = std::exp(-std::fabs(x));
  return e / ((1.0 + e) * (1.0 + e));
}
UOE_VM_INLINE double sigmoid_grad_from_output(double y) { return y * (1.0 - y); }
UOE_VM_INLINE double silu(double x) {
  const double xc = x < -800.0 ? -800.0 : x;
  return xc * vm::sigmoid(xc);
}
UOE_VM_INLINE double softplus(double x) { return (x < 0.0 ? 0.0 : x) + std::log1p(std::exp(-std::fabs(x))); }
UOE_VM_INLINE double silu_grad(double x) {
  const double xc = x < -800.0 ? -800.0 : (x > 800.0 ? 800.0 : x);
  return vm::sigmoid(xc) + xc * vm::sigmoid_grad(xc);
}
UOE_VM_INLINE void silu_and_grad(double x, double& y, double& dy) {
  y = vm::silu(x);
  dy = vm::silu_grad(x);
}
UOE_VM_INLINE double gelu(double x) {
  const double xc = x < -40.0 ? -40.0 : x;
  return xc * vm::sigmoid(xc * (1.5957691216057308 + 0.07135481627260025 * xc * xc));
}
UOE_VM_INLINE double gelu_grad(double x) {
  const double xc = x < -40.0 ? -40.0 : (x > 40.0 ? 40.0 : x);
  const double x2 = xc * xc;
  const double v = xc * (1.5957691216057308 + 0.07135481627260025 * x2);
  return vm::sigmoid(v) + xc * vm::sigmoid_grad(v) * (1.5957691216057308 + 0.21406444881780076 * x2);
}
UOE_VM_INLINE double gelu_erf(double x) {
  const double xc = x < -40.0 ? -40.0 : x;
  return xc * 0.5 * std::erfc(-xc * 0.7071067811865476);
}
UOE_VM_INLINE double gelu_erf_grad(double x) {
  const double xc = x < -40.0 ? -40.0 : (x > 40.0 ? 40.0 : x);
  return 0.5 * std::erfc(-xc * 0.7071067811865476) + xc * 0.3989422804014327 * std::exp(-0.5 * xc * xc);
}

}  // namespace uoe::cpu::vm
