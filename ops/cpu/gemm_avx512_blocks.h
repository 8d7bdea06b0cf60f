// AVX-512 building blocks shared by the float and the bfloat16 GEMM kernels: edge masks, the C-tile row store and
// the 16x16 transpose of 32-bit lanes (for bfloat16 a lane is a pair of consecutive k).
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "core/half.h"

#define UOE_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma,prfchw")))

namespace uoe::cpu::detail::avx512 {

UOE_AVX512 inline __mmask16 mask_first(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
}

// Zeroes the two accumulator vectors of each of the R rows of a C tile.
template <int R>
UOE_AVX512 inline void zero_rows(__m512* c0, __m512* c1) {
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
  }
}

// Stores alpha*acc (+ beta*C) into one row of C, masked to n columns of the two vectors.
UOE_AVX512 inline void store_row(float* c, __m512 acc0, __m512 acc1, __mmask16 m0, __mmask16 m1,
                                 __m512 va, __m512 vb, int beta_kind) {
  __m512 r0 = _mm512_mul_ps(acc0, va);
  __m512 r1 = _mm512_mul_ps(acc1, va);
  if (beta_kind == 1) {
    r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, c));
    r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, c + 16));
  } else if (beta_kind == 2) {
    r0 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m0, c), r0);
    r1 = _mm512_fmadd_ps(vb, _mm512_maskz_loadu_ps(m1, c + 16), r1);
  }
  _mm512_mask_storeu_ps(c, m0, r0);
  _mm512_mask_storeu_ps(c + 16, m1, r1);
}

// Full-mask maskz forms: same instructions as the plain intrinsics, whose _mm512_undefined_ps()
// trips GCC 12's -Wmaybe-uninitialized.
constexpr __mmask16 kAll = 0xFFFF;

// The 16 floats of x as bfloat16, rounded as float_to_bf16_bits rounds (to nearest even; NaN kept, made quiet).
UOE_AVX512 inline __m256i round_to_bf16(__m512 x) {
  const __m512i u = _mm512_castps_si512(x), one = _mm512_set1_epi32(1), high = _mm512_maskz_srli_epi32(kAll, u, 16);
  const __m512i bias = _mm512_add_epi32(_mm512_set1_epi32(0x7fff), _mm512_and_si512(high, one));
  const __m512i rounded = _mm512_maskz_srli_epi32(kAll, _mm512_add_epi32(u, bias), 16);
  const __m512i quiet_nan = _mm512_or_si512(high, _mm512_set1_epi32(0x40));
  const __mmask16 nan = _mm512_cmp_ps_mask(x, x, _CMP_UNORD_Q);
  return _mm512_maskz_cvtepi32_epi16(kAll, _mm512_mask_blend_epi32(nan, rounded, quiet_nan));
}

// In-register transpose of a 16x16 block: on return r[c] holds column c of the input rows.
UOE_AVX512 inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
#pragma GCC unroll 4
  for (int g = 0; g < 4; ++g) {
    const __m512 t0 = _mm512_maskz_unpacklo_ps(kAll, r[4 * g], r[4 * g + 1]);
    const __m512 t1 = _mm512_maskz_unpackhi_ps(kAll, r[4 * g], r[4 * g + 1]);
    const __m512 t2 = _mm512_maskz_unpacklo_ps(kAll, r[4 * g + 2], r[4 * g + 3]);
    const __m512 t3 = _mm512_maskz_unpackhi_ps(kAll, r[4 * g + 2], r[4 * g + 3]);
    // t[4g+e] lane L = rows 4g..4g+3 at column 4L+e
    t[4 * g + 0] = _mm512_maskz_shuffle_ps(kAll, t0, t2, 0x44);
    t[4 * g + 1] = _mm512_maskz_shuffle_ps(kAll, t0, t2, 0xEE);
    t[4 * g + 2] = _mm512_maskz_shuffle_ps(kAll, t1, t3, 0x44);
    t[4 * g + 3] = _mm512_maskz_shuffle_ps(kAll, t1, t3, 0xEE);
  }
#pragma GCC unroll 4
  for (int e = 0; e < 4; ++e) {
    const __m512 x = _mm512_maskz_shuffle_f32x4(kAll, t[e], t[4 + e], 0x44);
    const __m512 y = _mm512_maskz_shuffle_f32x4(kAll, t[e], t[4 + e], 0xEE);
    const __m512 z = _mm512_maskz_shuffle_f32x4(kAll, t[8 + e], t[12 + e], 0x44);
    const __m512 w = _mm512_maskz_shuffle_f32x4(kAll, t[8 + e], t[12 + e], 0xEE);
    u[0 + e] = _mm512_maskz_shuffle_f32x4(kAll, x, z, 0x88);
    u[4 + e] = _mm512_maskz_shuffle_f32x4(kAll, x, z, 0xDD);
    u[8 + e] = _mm512_maskz_shuffle_f32x4(kAll, y, w, 0x88);
    u[12 + e] = _mm512_maskz_shuffle_f32x4(kAll, y, w, 0xDD);
  }
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = u[i];
}

// 16 lanes (those in m, the rest zero) of a source row as float: float as it is, bfloat16 widened.
UOE_AVX512 inline __m512 load_lanes(const float* s, __mmask16 m) { return _mm512_maskz_loadu_ps(m, s); }
UOE_AVX512 inline __m512 load_lanes(const BFloat16* s, __mmask16 m) {
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(kAll, _mm256_maskz_loadu_epi16(m, s));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, wide, 16));
}

// dst[k*dst_stride + j] = src[j*lds + k] for j < rows (<= 16), k < kc, lanes rows..15 zero;
// only the lanes in store_mask are written. A bfloat16 source is widened as it is read.
template <typename TS>
UOE_AVX512 inline void gather_transpose(const TS* src, int64_t lds, int rows, int64_t kc, float* dst,
                                        int64_t dst_stride, __mmask16 store_mask) {
  int64_t k = 0;
  __m512 r[16];
  for (; k + 16 <= kc; k += 16) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      r[j] = j < rows ? load_lanes(src + j * lds + k, kAll) : _mm512_setzero_ps();
    transpose16(r);
#pragma GCC unroll 16
    for (int kk = 0; kk < 16; ++kk) _mm512_mask_storeu_ps(dst + (k + kk) * dst_stride, store_mask, r[kk]);
  }
  if (k < kc) {
    const int64_t rem = kc - k;
    const __mmask16 lm = mask_first(rem);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      r[j] = j < rows ? load_lanes(src + j * lds + k, lm) : _mm512_setzero_ps();
    transpose16(r);
    for (int64_t kk = 0; kk < rem; ++kk)
      _mm512_mask_storeu_ps(dst + (k + kk) * dst_stride, store_mask, r[kk]);
  }
}

}  // namespace uoe::cpu::detail::avx512
