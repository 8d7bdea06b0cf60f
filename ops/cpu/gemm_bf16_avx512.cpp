// AVX512-BF16 GEMM building blocks: a 14x32 register-tiled micro-kernel on VDPBF16PS (each instruction adds the
// products of 16 pairs of consecutive k to 16 float sums), and the VNNI-pair packing shared with the AMX kernels.
#include <cstring>
#include <type_traits>

#include "ops/cpu/gemm_avx512_blocks.h"
#include "ops/cpu/gemm_isa.h"

#define UOE_AVX512_BF16 __attribute__((target("avx512f,avx512dq,avx512bw,avx512vl,avx512bf16,fma,prfchw")))

namespace uoe::cpu::detail {
namespace {

constexpr int MR = 14;
constexpr int NR = 32;
constexpr int kPrefetchB = 8;  // k pairs ahead that B is prefetched to L1
constexpr __mmask16 kMR = 0x3FFF;

uint32_t pair_at(const BFloat16* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// R rows (R <= MR) of the MR x 32 tile over kp/2 pairs. Pair p of row i of A: packed, at a + 2·(p·MR + i); in
// place (A row-major), at a + 2·p + i·lda. Each C element is one VDPBF16PS chain over the pairs in ascending order
// whatever R and the layout of A, so edge tiles and both layouts give the same bits.
// The result goes to the float C (alpha·sum + beta·C), or, with a bfloat16 `out`, to out only: the float
// alpha·sum (+ C, the earlier K blocks' float sums, when beta is 1) rounded to nearest even by VCVTNE2PS2BF16.
template <int R, bool kInPlace, bool kBf16Out = false>
UOE_AVX512_BF16 void micro_rows(int64_t kp, const BFloat16* a, int64_t lda, const BFloat16* b, float* c, int64_t ldc,
                                int nr, float alpha, float beta, BFloat16* out = nullptr, int64_t ldo = 0) {
  constexpr int64_t ps = kInPlace ? 2 : 2 * MR;
  const int64_t rs = kInPlace ? lda : 2;
  __m512 c0[R], c1[R];
  avx512::zero_rows<R>(c0, c1);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) __builtin_prefetch(kBf16Out ? static_cast<void*>(out + i * ldo) : c + i * ldc, 1, 3);
  for (int64_t p = 0; p < kp / 2; ++p, a += ps, b += 2 * NR) {
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchB * 2 * NR), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(b + kPrefetchB * 2 * NR + 32), _MM_HINT_T0);
    const __m512bh b0 = (__m512bh)_mm512_load_si512(b);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(b + 32);
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      const __m512bh ai = (__m512bh)_mm512_set1_epi32(int(pair_at(a + i * rs)));
      c0[i] = _mm512_dpbf16_ps(c0[i], ai, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], ai, b1);
    }
  }
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
  const int beta_kind = beta == 0.0f ? 0 : beta == 1.0f ? 1 : 2;
  const __mmask16 m0 = avx512::mask_first(nr), m1 = avx512::mask_first(nr - 16);
  if constexpr (kBf16Out) {
    const __mmask32 m = nr >= 32 ? ~__mmask32(0) : (__mmask32(1) << nr) - 1;
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) {
      __m512 r0 = _mm512_mul_ps(c0[i], va), r1 = _mm512_mul_ps(c1[i], va);
      if (beta_kind == 1) {
        r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, c + i * ldc));
        r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, c + i * ldc + 16));
      }
      _mm512_mask_storeu_epi16(out + i * ldo, m, (__m512i)_mm512_cvtne2ps_pbh(r1, r0));
    }
  } else {
#pragma GCC unroll 16
    for (int i = 0; i < R; ++i) avx512::store_row(c + i * ldc, c0[i], c1[i], m0, m1, va, vb, beta_kind);
  }
}

void micro(int64_t kp, const BFloat16* a, const BFloat16* b, float* c, int64_t ldc, int mr, int nr, float alpha,
           float beta) {
  with_rows<MR>(mr, [&](auto rows) {
    micro_rows<decltype(rows)::value, false>(kp, a, 0, b, c, ldc, nr, alpha, beta);
  });
}

// A read in place (no packing): its rows already hold pairs of consecutive k.
void micro_unpacked_a(int64_t kc, const BFloat16* a, int64_t lda, const BFloat16* b, float* c, int64_t ldc, int mr,
                      int nr, float alpha, float beta) {
  with_rows<MR>(mr, [&](auto rows) {
    micro_rows<decltype(rows)::value, true>(kc, a, lda, b, c, ldc, nr, alpha, beta);
  });
}

// The last K block of a bfloat16 C (GemmKernels::micro_bf16_out): A packed, or in place when lda > 0.
void micro_bf16_out(int64_t kp, const BFloat16* a, int64_t lda, const BFloat16* b, const float* partial,
                    int64_t ldc, BFloat16* out, int64_t ldo, int mr, int nr, float alpha) {
  float* c = const_cast<float*>(partial);  // read only: beta is 1 with a partial, else 0
  const float beta = partial ? 1.0f : 0.0f;
  with_rows<MR>(mr, [&](auto rows) {
    if (lda > 0) micro_rows<decltype(rows)::value, true, true>(kp, a, lda, b, c, ldc, nr, alpha, beta, out, ldo);
    else micro_rows<decltype(rows)::value, false, true>(kp, a, 0, b, c, ldc, nr, alpha, beta, out, ldo);
  });
}

// Interleaves rows 2p and 2p+1 of a source whose k runs down the rows (element (k, x) at src[k*ld + x]) into
// pairs: dst[(p*width + x)*2 + (k&1)], x < valid (<= 32) read, lanes up to width (<= 32) zero; kp/2 pairs.
UOE_AVX512_BF16 void interleave_rows(const BFloat16* src, int64_t ld, int valid, int width, int64_t kc, int64_t kp,
                                     BFloat16* dst) {
  alignas(64) static constexpr uint16_t kLo[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                                   8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i lo_idx = _mm512_load_si512(kLo);
  const __m512i hi_idx = _mm512_add_epi16(lo_idx, _mm512_set1_epi16(16));
  const __mmask32 load_mask = valid >= 32 ? ~__mmask32(0) : (__mmask32(1) << valid) - 1;
  const __mmask16 store_lo = avx512::mask_first(width), store_hi = avx512::mask_first(width - 16);
  for (int64_t p = 0; p < kp / 2; ++p) {
    const int64_t k = 2 * p;
    const __m512i r0 = k < kc ? _mm512_maskz_loadu_epi16(load_mask, src + k * ld) : _mm512_setzero_si512();
    const __m512i r1 = k + 1 < kc ? _mm512_maskz_loadu_epi16(load_mask, src + (k + 1) * ld) : _mm512_setzero_si512();
    BFloat16* d = dst + p * width * 2;
    _mm512_mask_storeu_epi32(d, store_lo, _mm512_permutex2var_epi16(r0, lo_idx, r1));
    if (width > 16) _mm512_mask_storeu_epi32(d + 32, store_hi, _mm512_permutex2var_epi16(r0, hi_idx, r1));
  }
}

// Gathers pairs from a source whose k runs along the rows (element (k, x) at src[x*ld + k]):
// dst[(p*width + x)*2 + (k&1)] for x < valid (<= 16), lanes up to 16 zero, only the lanes in store_mask written.
UOE_AVX512_BF16 void gather_pairs(const BFloat16* src, int64_t ld, int valid, int64_t kc, int64_t kp, int width,
                                  __mmask16 store_mask, BFloat16* dst) {
  const int64_t full = kc / 2;  // pairs wholly inside kc
  if (ld % 2 == 0) {
    avx512::gather_transpose(reinterpret_cast<const float*>(src), ld / 2, valid, full,
                             reinterpret_cast<float*>(dst), width, store_mask);
  } else {  // pairs straddle 32-bit boundaries: one at a time
    for (int64_t p = 0; p < full; ++p)
      for (int x = 0; x < 16; ++x)
        if (store_mask >> x & 1) {
          const uint32_t v = x < valid ? pair_at(src + x * ld + 2 * p) : 0;
          std::memcpy(dst + (p * width + x) * 2, &v, sizeof(v));
        }
  }
  for (int64_t p = full; p < kp / 2; ++p)  // the odd last k (its partner zero), then the padding
    for (int x = 0; x < 16; ++x)
      if (store_mask >> x & 1) {
        const bool real = x < valid && 2 * p < kc;
        dst[(p * width + x) * 2] = real ? src[x * ld + 2 * p] : BFloat16();
        dst[(p * width + x) * 2 + 1] = BFloat16();
      }
}

void pack_a(bool trans, const BFloat16* A, int64_t lda, int64_t mc, int64_t kc, BFloat16* dst) {
  const int64_t kp = kc + kc % 2;
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {
    const int rows = mc - i0 < MR ? int(mc - i0) : MR;
    if (trans) interleave_rows(A + i0, lda, rows, MR, kc, kp, dst + i0 * kp);
    else gather_pairs(A + i0 * lda, lda, rows, kc, kp, MR, kMR, dst + i0 * kp);
  }
}

void pack_b(bool trans, const BFloat16* B, int64_t ldb, int64_t kc, int64_t nc, BFloat16* dst) {
  pack_b_vnni32(trans, B, ldb, kc, kc + kc % 2, nc, dst);
}

}  // namespace

void pack_b_vnni32(bool trans, const BFloat16* B, int64_t ldb, int64_t kc, int64_t kp, int64_t nc, BFloat16* dst) {
  const int cols = int(nc);
  if (!trans) {
    interleave_rows(B, ldb, cols, NR, kc, kp, dst);
    return;
  }
  gather_pairs(B, ldb, cols < 16 ? cols : 16, kc, kp, NR, avx512::kAll, dst);
  gather_pairs(B + 16 * ldb, ldb, cols > 16 ? cols - 16 : 0, kc, kp, NR, avx512::kAll, dst + 32);
}

const GemmKernels<BFloat16, float>& gemm_kernels_avx512_bf16() {
  static const GemmKernels<BFloat16, float> k{MR,     NR, 1024, 336, 1 << 22, &micro, &pack_a, &pack_b, 2,
                                               &micro_unpacked_a, &micro_bf16_out};
  return k;
}

}  // namespace uoe::cpu::detail
