// AVX2+FMA float GEMM building blocks: 6x16 register-tiled micro-kernel and packing.
#include <immintrin.h>

#include "ops/cpu/gemm_isa.h"

#define UOE_AVX2 __attribute__((target("avx2,fma")))

namespace uoe::cpu::detail {
namespace {

constexpr int MR = 6;
constexpr int NR = 16;

UOE_AVX2 inline __m256i lane_mask(int64_t n) {  // lanes [0, n) set, n clamped to [0, 8]
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int v = n < 0 ? 0 : n > 8 ? 8 : int(n);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(v), idx);
}

UOE_AVX2 inline __m256 load_part(const float* p, __m256i m, bool full) {
  return full ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
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

// R rows (R <= MR) of the MR x 16 tile; same per-element FMA order for every R.
template <int R>
UOE_AVX2 void micro_rows(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int nr,
                         float alpha, float beta) {
  __m256 c0[R], c1[R];
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
  const __m256 va = _mm256_set1_ps(alpha);
  const __m256 vb = _mm256_set1_ps(beta);
  const int beta_kind = beta == 0.0f ? 0 : beta == 1.0f ? 1 : 2;
  const __m256i m0 = lane_mask(nr), m1 = lane_mask(nr - 8);
  const bool full = nr == NR;
#pragma GCC unroll 8
  for (int i = 0; i < R; ++i) store_row(c + i * ldc, c0[i], c1[i], m0, m1, full, va, vb, beta_kind);
}

UOE_AVX2 void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                    float alpha, float beta) {
  switch (mr) {
    case 6: micro_rows<6>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 5: micro_rows<5>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 4: micro_rows<4>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 3: micro_rows<3>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 2: micro_rows<2>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 1: micro_rows<1>(kc, a, b, c, ldc, nr, alpha, beta); break;
    default: break;
  }
}

UOE_AVX2 void pack_a(bool trans, const float* A, int64_t lda, int64_t mc, int64_t kc, float* dst) {
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int rows = mc - i0 < MR ? int(mc - i0) : MR;
    float* d = dst + i0 * kc;
    if (trans) {
      const float* s = A + i0;
      for (int64_t k = 0; k < kc; ++k)
        for (int i = 0; i < MR; ++i) d[k * MR + i] = i < rows ? s[k * lda + i] : 0.0f;
    } else {
      const float* s = A + i0 * lda;
      if (rows == MR) {
        for (int64_t k = 0; k < kc; ++k)
          for (int i = 0; i < MR; ++i) d[k * MR + i] = s[i * lda + k];
      } else {
        for (int64_t k = 0; k < kc; ++k)
          for (int i = 0; i < MR; ++i) d[k * MR + i] = i < rows ? s[i * lda + k] : 0.0f;
      }
    }
  }
}

UOE_AVX2 void pack_b(bool trans, const float* B, int64_t ldb, int64_t kc, int64_t nc, float* dst) {
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {
    const int64_t cols = nc - j0 < NR ? nc - j0 : NR;
    float* d = dst + j0 * kc;
    if (!trans) {
      const float* s = B + j0;
      if (cols == NR) {
        for (int64_t k = 0; k < kc; ++k) {
          _mm256_store_ps(d + k * NR, _mm256_loadu_ps(s + k * ldb));
          _mm256_store_ps(d + k * NR + 8, _mm256_loadu_ps(s + k * ldb + 8));
        }
      } else {
        const __m256i m0 = lane_mask(cols), m1 = lane_mask(cols - 8);
        for (int64_t k = 0; k < kc; ++k) {
          _mm256_store_ps(d + k * NR, _mm256_maskload_ps(s + k * ldb, m0));
          _mm256_store_ps(d + k * NR + 8, _mm256_maskload_ps(s + k * ldb + 8, m1));
        }
      }
    } else {
      const float* s = B + j0 * ldb;
      for (int64_t k = 0; k < kc; ++k)
        for (int j = 0; j < NR; ++j) d[k * NR + j] = j < cols ? s[j * ldb + k] : 0.0f;
    }
  }
}

}  // namespace

const GemmKernels<float>& gemm_kernels_avx2_f32() {
  static const GemmKernels<float> k{MR, NR, 512, 144, 1 << 22, &micro, &pack_a, &pack_b};
  return k;
}

}  // namespace uoe::cpu::detail
