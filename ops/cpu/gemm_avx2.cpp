// AVX2+FMA float GEMM building blocks: 6x16 register-tiled micro-kernel and packing, the packing also reading
// bfloat16 operands (widened as read) and the micro-kernel also rounding a bfloat16 C (the bf16 GEMM's f32 path).
#include <immintrin.h>

#include <cstring>
#include <type_traits>

#include "ops/cpu/gemm_isa.h"

#define UOE_AVX2 __attribute__((target("avx2,fma")))

namespace uoe::cpu::detail {
namespace {

constexpr int MR = 6;
constexpr int NR = 16;
constexpr int64_t KC = 512, MC = 144, kBElems = int64_t{1} << 22;  // blocking (GemmKernels)

UOE_AVX2 inline __m256i lane_mask(int64_t n) {  // lanes [0, n) set, n clamped to [0, 8]
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int v = n < 0 ? 0 : n > 8 ? 8 : int(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(v), idx);
}

UOE_AVX2 inline __m256 load_part(const float* p, __m256i m, bool full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}

// 8 consecutive elements as float: float as they are, bfloat16 widened.
UOE_AVX2 inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
UOE_AVX2 inline __m256 load8(const BFloat16* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// The 8 floats of x as bfloat16, rounded as float_to_bf16_bits rounds (to nearest even; NaN kept, made quiet).
UOE_AVX2 inline __m128i round_to_bf16(__m256 x) {
  const __m256i u = _mm256_castps_si256(x), high = _mm256_srli_epi32(u, 16);
  const __m256i bias = _mm256_add_epi32(_mm256_set1_epi32(0x7fff), _mm256_and_si256(high, _mm256_set1_epi32(1)));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(u, bias), 16);
  const __m256i quiet_nan = _mm256_or_si256(high, _mm256_set1_epi32(0x40));
  const __m256i nan = _mm256_castps_si256(_mm256_cmp_ps(x, x, _CMP_UNORD_Q));
  const __m256i r = _mm256_blendv_epi8(rounded, quiet_nan, nan);  // each lane below 2^16: packs exactly
  return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

UOE_AVX2 inline void store_row(float* c, __m256 acc0, __m256 acc1, __m256i m0, __m256i m1, bool full,
                               __m256 va, __m256 vb, int beta_kind) {
  __m256 r0 = _mm256_mul_ps(acc0, va);
  __m256 r1 = _mm256_mul_ps(acc1, va);
  if (beta_kind == 1) {
    r0 = _mm256_add_ps(r0, load_part(c, m0, full));
    r1 = _mm256_add_ps(r1, load_part(c + 8, m1, full));
  } else if (beta_kind == 2) {
    r0 = _mm256_fmadd_ps(vb, load_part(c, m0, full), r0);
    r1 = _mm256_fmadd_ps(vb, load_part(c + 8, m1, full), r1);
  }
  if (full) {
    _mm256_storeu_ps(c, r0);
    _mm256_storeu_ps(c + 8, r1);
  } else {
    _mm256_maskstore_ps(c, m0, r0);
    _mm256_maskstore_ps(c + 8, m1, r1);
  }
}

// The k loop of R rows (R <= MR) of the MR x 16 tile into c0, c1; same per-element FMA order for every R.
template <int R>
UOE_AVX2 inline void accumulate(int64_t kc, const float* a, const float* b, __m256* c0, __m256* c1) {
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    c0[i] = _mm256_setzero_ps();
    c1[i] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 b0 = _mm256_load_ps(b);
    const __m256 b1 = _mm256_load_ps(b + 8);
#pragma GCC unroll 8
    for (int i = 0; i < R; ++i) {
      const __m256 ai = _mm256_broadcast_ss(a + i);
      c0[i] = _mm256_fmadd_ps(ai, b0, c0[i]);
      c1[i] = _mm256_fmadd_ps(ai, b1, c1[i]);
    }
    a += MR;
    b += NR;
  }
}

template <int R>
UOE_AVX2 void micro_rows(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int nr,
                         float alpha, float beta) {
  __m256 c0[R], c1[R];
  accumulate<R>(kc, a, b, c0, c1);
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 vb = _mm256_set1_ps(beta);
  const int beta_kind = beta == 0.0f ? 0 : beta == 1.0f ? 1 : 2;
  const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
  const bool full = nr == NR;
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) store_row(c + i * ldc, c0[i], c1[i], m0, m1, full, va, vb, beta_kind);
}

// R rows of the tile rounded into bfloat16: out = bfloat16(alpha * sum + partial) (partial may be null), rounded
// as float_to_bf16_bits rounds, so the bits of the float result rounded afterwards.
template <int R>
UOE_AVX2 void micro_rows_bf16_out(int64_t kc, const float* a, const float* b, const float* partial, int64_t ldp,
                                  BFloat16* out, int64_t ldo, int nr, float alpha) {
  __m256 c0[R], c1[R];
  accumulate<R>(kc, a, b, c0, c1);
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
  const bool full = nr == NR;
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) {
    __m256 r0 = _mm256_mul_ps(c0[i], va), r1 = _mm256_mul_ps(c1[i], va);
    if (partial) {
      r0 = _mm256_add_ps(r0, load_part(partial + i * ldp, m0, full));
      r1 = _mm256_add_ps(r1, load_part(partial + i * ldp + 8, m1, full));
    }
    if (full) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * ldo), round_to_bf16(r0));
      _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i * ldo + 8), round_to_bf16(r1));
      continue;
    }
    alignas(16) uint16_t row[NR];
    _mm_store_si128(reinterpret_cast<__m128i*>(row), round_to_bf16(r0));
    _mm_store_si128(reinterpret_cast<__m128i*>(row + 8), round_to_bf16(r1));
    std::memcpy(out + i * ldo, row, size_t(nr) * sizeof(uint16_t));
  }
}

void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr, float alpha,
           float beta) {
  with_rows<MR>(mr, [&](auto rows) { micro_rows<decltype(rows)::value>(kc, a, b, c, ldc, nr, alpha, beta); });
}

// GemmKernels::micro_bf16_out of the widened kernels (A always packed: lda is 0).
void micro_bf16_out(int64_t kc, const float* a, int64_t, const float* b, const float* partial, int64_t ldp,
                    BFloat16* out, int64_t ldo, int mr, int nr, float alpha) {
  with_rows<MR>(mr, [&](auto rows) {
    micro_rows_bf16_out<decltype(rows)::value>(kc, a, b, partial, ldp, out, ldo, nr, alpha);
  });
}

// The packers read float or bfloat16 (widened as it is read: float(x) is exact).
template <typename TS>
UOE_AVX2 void pack_a(bool trans, const TS* A, int64_t lda, int64_t mc, int64_t kc, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int rows = mc - i0 < MR ? int(mc - i0) : MR;
    float* d = dst + i0 * kc;
    if (trans) {
      const TS* s = A + i0;
      for (int64_t k = 0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) d[k * MR + i] = i < rows ? float(s[k * lda + i]) : 0.0f;
    } else {
      const TS* s = A + i0 * lda;
      if (rows == MR) {
        for (int64_t k = 0; k < kc; ++k)
          for (int i = 0; i < MR; ++i) d[k * MR + i] = float(s[i * lda + k]);
      } else {
        for (int64_t k = 0; k < kc; ++k)
          for (int i = 0; i < MR; ++i) d[k * MR + i] = i < rows ? float(s[i * lda + k]) : 0.0f;
      }
    }
  }
}

template <typename TS>
UOE_AVX2 void pack_b(bool trans, const TS* B, int64_t ldb, int64_t kc, int64_t nc, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int64_t cols = nc - j0 < NR ? nc - j0 : NR;
    float* d = dst + j0 * kc;
    if (trans) {
      const TS* s = B + j0 * ldb;
      for (int64_t k = 0; k < kc; ++k)
        for (int j = 0; j < NR; ++j) d[k * NR + j] = j < cols ? float(s[j * ldb + k]) : 0.0f;
      continue;
    }
    const TS* s = B + j0;
    if (cols == NR) {
      for (int64_t k = 0; k < kc; ++k) {
        _mm256_store_ps(d + k * NR, load8(s + k * ldb));
        _mm256_store_ps(d + k * NR + 8, load8(s + k * ldb + 8));
      }
    } else if constexpr (std::is_same_v<TS, float>) {
      const __m256i m0 = lane_mask(cols), m1 = lane_mask(cols - 8);
      for (int64_t k = 0; k < kc; ++k) {
        _mm256_store_ps(d + k * NR, _mm256_maskload_ps(s + k * ldb, m0));
        _mm256_store_ps(d + k * NR + 8, _mm256_maskload_ps(s + k * ldb + 8, m1));
      }
    } else {  // the last panel of a bfloat16 B, narrower than NR
      for (int64_t k = 0; k < kc; ++k)
        for (int j = 0; j < NR; ++j) d[k * NR + j] = j < cols ? float(s[k * ldb + j]) : 0.0f;
    }
  }
}

}  // namespace

const GemmKernels<float>& gemm_kernels_avx2_f32() {
  static const GemmKernels<float> k{MR, NR, KC, MC, kBElems, &micro, &pack_a<float>, &pack_b<float>};
  return k;
}

const GemmKernels<float, float, BFloat16>& gemm_kernels_avx2_widened() {
  static const GemmKernels<float, float, BFloat16> k{
      MR, NR, KC, MC, kBElems, &micro, &pack_a<BFloat16>, &pack_b<BFloat16>, 1, nullptr, &micro_bf16_out};
  return k;
}

}  // namespace uoe::cpu::detail
