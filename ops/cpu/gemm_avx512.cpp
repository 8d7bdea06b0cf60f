// AVX-512 float GEMM building blocks: 14x32 register-tiled micro-kernel and vectorised packing.
#include <immintrin.h>

#include "ops/cpu/gemm_isa.h"

#define UOE_AVX512 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,fma,prfchw")))

namespace uoe::cpu::detail {
namespace {

constexpr int MR = 14;
constexpr int NR = 32;
constexpr int kPrefetchB = 16;  // k steps ahead that B is prefetched to L1
constexpr int kTailK = 24;      // k steps left when the C tile is prefetched

UOE_AVX512 inline __mmask16 mask_first(int64_t n) {
  return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1u);
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

// One k step of the R x 32 tile: two B vectors, R broadcasts of A, 2R FMAs.
template <int R>
UOE_AVX512 inline void k_step(const float* a, const float* b, __m512* c0, __m512* c1) {
  _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchB * NR), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchB * NR + 16), _MM_HINT_T0);
  const __m512 b0 = _mm512_load_ps(b);
  const __m512 b1 = _mm512_load_ps(b + 16);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    const __m512 ai = _mm512_set1_ps(a[i]);
    c0[i] = _mm512_fmadd_ps(ai, b0, c0[i]);
    c1[i] = _mm512_fmadd_ps(ai, b1, c1[i]);
  }
}

// R rows (R <= MR) of the MR x 32 tile. Each C element is an FMA chain over k in ascending
// order whatever R is, so edge tiles give the same bits as full ones.
template <int R>
UOE_AVX512 void micro_rows(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int nr,
                           float alpha, float beta) {
  __m512 c0[R], c1[R];
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    c0[i] = _mm512_setzero_ps();
    c1[i] = _mm512_setzero_ps();
  }
  // The C tile is prefetched for writing (prefetchw, also when beta == 0) at the start, which
  // hides a DRAM miss when kc is small, and again kTailK steps before the end, in case the
  // streaming of A and B evicted it from L1 meanwhile.
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + nr - 1, 1, 3);
  }
  const int64_t k_main = kc > kTailK ? kc - kTailK : 0;
  for (int64_t k = 0; k < k_main; ++k, a += MR, b += NR) k_step<R>(a, b, c0, c1);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    __builtin_prefetch(c + i * ldc, 1, 3);
    __builtin_prefetch(c + i * ldc + nr - 1, 1, 3);
  }
  for (int64_t k = k_main; k < kc; ++k, a += MR, b += NR) k_step<R>(a, b, c0, c1);

  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
  const int beta_kind = beta == 0.0f ? 0 : beta == 1.0f ? 1 : 2;
  const __mmask16 m0 = mask_first(nr);
  const __mmask16 m1 = mask_first(nr - 16);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) store_row(c + i * ldc, c0[i], c1[i], m0, m1, va, vb, beta_kind);
}

UOE_AVX512 void micro(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int mr, int nr,
                      float alpha, float beta) {
  switch (mr) {
    case 14: micro_rows<14>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 13: micro_rows<13>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 12: micro_rows<12>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 11: micro_rows<11>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 10: micro_rows<10>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 9: micro_rows<9>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 8: micro_rows<8>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 7: micro_rows<7>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 6: micro_rows<6>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 5: micro_rows<5>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 4: micro_rows<4>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 3: micro_rows<3>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 2: micro_rows<2>(kc, a, b, c, ldc, nr, alpha, beta); break;
    case 1: micro_rows<1>(kc, a, b, c, ldc, nr, alpha, beta); break;
    default: break;
  }
}

// Full-mask maskz forms: same instructions as the plain intrinsics, whose _mm512_undefined_ps()
// trips GCC 12's -Wmaybe-uninitialized.
constexpr __mmask16 kAll = 0xFFFF;
constexpr __mmask16 kMR = 0x3FFF;  // MR = 14 lanes: a packed A row (stores must not overrun it)

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

// dst[k*dst_stride + j] = src[j*lds + k] for j < rows (<= 16), k < kc, lanes rows..15 zero;
// only the lanes in store_mask are written.
UOE_AVX512 void gather_transpose(const float* src, int64_t lds, int rows, int64_t kc, float* dst,
                                 int64_t dst_stride, __mmask16 store_mask) {
  int64_t k = 0;
  __m512 r[16];
  for (; k + 16 <= kc; k += 16) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      r[j] = j < rows ? _mm512_loadu_ps(src + j * lds + k) : _mm512_setzero_ps();
    transpose16(r);
#pragma GCC unroll 16
    for (int kk = 0; kk < 16; ++kk) _mm512_mask_storeu_ps(dst + (k + kk) * dst_stride, store_mask, r[kk]);
  }
  if (k < kc) {
    const int64_t rem = kc - k;
    const __mmask16 lm = mask_first(rem);
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j)
      r[j] = j < rows ? _mm512_maskz_loadu_ps(lm, src + j * lds + k) : _mm512_setzero_ps();
    transpose16(r);
    for (int64_t kk = 0; kk < rem; ++kk)
      _mm512_mask_storeu_ps(dst + (k + kk) * dst_stride, store_mask, r[kk]);
  }
}

// Both packers walk the source row by row where rows are contiguous (trans A, plain B), covering
// every panel of the block per row: sequential reads and one page per row instead of one per
// row and panel.
UOE_AVX512 void pack_a(bool trans, const float* A, int64_t lda, int64_t mc, int64_t kc, float* dst) {
  if (trans) {  // A stored [K,M]: row k holds the block's mc values contiguously
    const int64_t full = mc / MR, rem = mc - full * MR;
    const __mmask16 mrem = mask_first(rem);
    for (int64_t k = 0; k < kc; ++k) {
      const float* s = A + k * lda;
      float* d = dst + k * MR;
      for (int64_t p = 0; p < full; ++p)
        _mm512_mask_storeu_ps(d + p * MR * kc, kMR, _mm512_maskz_loadu_ps(kMR, s + p * MR));
      if (rem) _mm512_mask_storeu_ps(d + full * MR * kc, kMR, _mm512_maskz_loadu_ps(mrem, s + full * MR));
    }
    return;
  }
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {  // A stored [M,K]: transpose 16-k slices of MR rows
    const int rows = mc - i0 < MR ? int(mc - i0) : MR;
    gather_transpose(A + i0 * lda, lda, rows, kc, dst + i0 * kc, MR, kMR);
  }
}

UOE_AVX512 void pack_b(bool trans, const float* B, int64_t ldb, int64_t kc, int64_t nc, float* dst) {
  if (!trans) {  // B stored [K,N]: row k holds the block's nc values contiguously
    const int64_t full = nc / NR, rem = nc - full * NR;
    const __mmask16 m0 = mask_first(rem), m1 = mask_first(rem - 16);
    for (int64_t k = 0; k < kc; ++k) {
      const float* s = B + k * ldb;
      float* d = dst + k * NR;
      for (int64_t p = 0; p < full; ++p) {
        _mm512_store_ps(d + p * NR * kc, _mm512_loadu_ps(s + p * NR));
        _mm512_store_ps(d + p * NR * kc + 16, _mm512_loadu_ps(s + p * NR + 16));
      }
      if (rem) {
        _mm512_store_ps(d + full * NR * kc, _mm512_maskz_loadu_ps(m0, s + full * NR));
        _mm512_store_ps(d + full * NR * kc + 16, _mm512_maskz_loadu_ps(m1, s + full * NR + 16));
      }
    }
    return;
  }
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {  // B stored [N,K]: transpose 16-column halves
    const int64_t cols = nc - j0 < NR ? nc - j0 : NR;
    const float* s = B + j0 * ldb;
    float* d = dst + j0 * kc;
    gather_transpose(s, ldb, cols < 16 ? int(cols) : 16, kc, d, NR, kAll);
    if (cols > 16) {
      gather_transpose(s + 16 * ldb, ldb, int(cols - 16), kc, d + 16, NR, kAll);
    } else {
      for (int64_t k = 0; k < kc; ++k) _mm512_store_ps(d + k * NR + 16, _mm512_setzero_ps());
    }
  }
}

}  // namespace

const GemmKernels<float>& gemm_kernels_avx512_f32() {
  static const GemmKernels<float> k{MR, NR, 1024, 336, 1 << 22, &micro, &pack_a, &pack_b};
  return k;
}

}  // namespace uoe::cpu::detail
