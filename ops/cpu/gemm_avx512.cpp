// AVX-512 float GEMM building blocks: 14x32 register-tiled micro-kernel and vectorised packing, the packing
// also reading bfloat16 operands (widened as read) and the micro-kernel also rounding a bfloat16 C (the bf16
// GEMM's f32 path).
#include "ops/cpu/gemm_avx512_blocks.h"
#include "ops/cpu/gemm_isa.h"

namespace uoe::cpu::detail {
namespace {

using avx512::gather_transpose;
using avx512::kAll;
using avx512::load_lanes;
using avx512::mask_first;
using avx512::store_row;

constexpr int MR = 14;
constexpr int NR = 32;
constexpr int64_t KC = 1024, MC = 336, kBElems = int64_t{1} << 22;  // blocking (GemmKernels)
constexpr int kPrefetchB = 16;  // k steps ahead that B is prefetched to L1
constexpr int kTailK = 24;      // k steps left when the C tile is prefetched
constexpr __mmask16 kMR = 0x3FFF;  // MR = 14 lanes: a packed A row (stores must not overrun it)

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

// The k loop of R rows (R <= MR) of the MR x 32 tile into c0, c1. Each C element is an FMA chain over k in
// ascending order whatever R is, so edge tiles give the same bits as full ones. The tile's destination (rows of
// nr elements at dst + i*ld) is prefetched for writing (prefetchw) at the start, which hides a DRAM miss when kc
// is small, and again kTailK steps before the end, in case the streaming of A and B evicted it from L1 meanwhile.
template <int R, typename TD>
UOE_AVX512 inline void accumulate(int64_t kc, const float* a, const float* b, const TD* dst, int64_t ld, int nr,
                                  __m512* c0, __m512* c1) {
  avx512::zero_rows<R>(c0, c1);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    __builtin_prefetch(dst + i * ld, 1, 3);
    __builtin_prefetch(dst + i * ld + nr - 1, 1, 3);
  }
  const int64_t k_main = kc > kTailK ? kc - kTailK : 0;
  for (int64_t k = 0; k < k_main; ++k, a += MR, b += NR) k_step<R>(a, b, c0, c1);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    __builtin_prefetch(dst + i * ld, 1, 3);
    __builtin_prefetch(dst + i * ld + nr - 1, 1, 3);
  }
  for (int64_t k = k_main; k < kc; ++k, a += MR, b += NR) k_step<R>(a, b, c0, c1);
}

template <int R>
UOE_AVX512 void micro_rows(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int nr,
                           float alpha, float beta) {
  __m512 c0[R], c1[R];
  accumulate<R>(kc, a, b, c, ldc, nr, c0, c1);
  const __m512 va = _mm512_set1_ps(alpha);
  const __m512 vb = _mm512_set1_ps(beta);
  const int beta_kind = beta == 0.0f ? 0 : beta == 1.0f ? 1 : 2;
  const __mmask16 m0 = mask_first(nr);
  const __mmask16 m1 = mask_first(nr - 16);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) store_row(c + i * ldc, c0[i], c1[i], m0, m1, va, vb, beta_kind);
}

// R rows of the tile rounded into bfloat16: out = bfloat16(alpha * sum + partial) (partial may be null), rounded
// as float_to_bf16_bits rounds, so the bits of the float result rounded afterwards.
template <int R>
UOE_AVX512 void micro_rows_bf16_out(int64_t kc, const float* a, const float* b, const float* partial, int64_t ldp,
                                    BFloat16* out, int64_t ldo, int nr, float alpha) {
  __m512 c0[R], c1[R];
  accumulate<R>(kc, a, b, out, ldo, nr, c0, c1);
  const __m512 va = _mm512_set1_ps(alpha);
  const __mmask16 m0 = mask_first(nr), m1 = mask_first(nr - 16);
#pragma GCC unroll 16
  for (int i = 0; i < R; ++i) {
    __m512 r0 = _mm512_mul_ps(c0[i], va), r1 = _mm512_mul_ps(c1[i], va);
    if (partial) {
      r0 = _mm512_add_ps(r0, _mm512_maskz_loadu_ps(m0, partial + i * ldp));
      r1 = _mm512_add_ps(r1, _mm512_maskz_loadu_ps(m1, partial + i * ldp + 16));
    }
    _mm256_mask_storeu_epi16(out + i * ldo, m0, avx512::round_to_bf16(r0));
    _mm256_mask_storeu_epi16(out + i * ldo + 16, m1, avx512::round_to_bf16(r1));
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

// Both packers walk the source row by row where rows are contiguous (trans A, plain B), covering
// every panel of the block per row: sequential reads and one page per row instead of one per
// row and panel. A bfloat16 source is widened to float in the registers as it is read.
template <typename TS>
UOE_AVX512 void pack_a(bool trans, const TS* A, int64_t lda, int64_t mc, int64_t kc, float* dst) {
  if (trans) {  // A stored [K,M]: row k holds the block's mc values contiguously
    const int64_t full = mc / MR, rem = mc - full * MR;
    const __mmask16 mrem = mask_first(rem);
    for (int64_t k = 0; k < kc; ++k) {
      const TS* s = A + k * lda;
      float* d = dst + k * MR;
      for (int64_t p = 0; p < full; ++p)
        _mm512_mask_storeu_ps(d + p * MR * kc, kMR, load_lanes(s + p * MR, kMR));
      if (rem) _mm512_mask_storeu_ps(d + full * MR * kc, kMR, load_lanes(s + full * MR, mrem));
    }
    return;
  }
  for (int64_t i0 = 0; i0 < mc; i0 += MR) {  // A stored [M,K]: transpose 16-k slices of MR rows
    const int rows = mc - i0 < MR ? int(mc - i0) : MR;
    gather_transpose(A + i0 * lda, lda, rows, kc, dst + i0 * kc, MR, kMR);
  }
}

template <typename TS>
UOE_AVX512 void pack_b(bool trans, const TS* B, int64_t ldb, int64_t kc, int64_t nc, float* dst) {
  if (!trans) {  // B stored [K,N]: row k holds the block's nc values contiguously
    const int64_t full = nc / NR, rem = nc - full * NR;
    const __mmask16 m0 = mask_first(rem), m1 = mask_first(rem - 16);
    for (int64_t k = 0; k < kc; ++k) {
      const TS* s = B + k * ldb;
      float* d = dst + k * NR;
      for (int64_t p = 0; p < full; ++p) {
        _mm512_store_ps(d + p * NR * kc, load_lanes(s + p * NR, kAll));
        _mm512_store_ps(d + p * NR * kc + 16, load_lanes(s + p * NR + 16, kAll));
      }
      if (rem) {
        _mm512_store_ps(d + full * NR * kc, load_lanes(s + full * NR, m0));
        _mm512_store_ps(d + full * NR * kc + 16, load_lanes(s + full * NR + 16, m1));
      }
    }
    return;
  }
  for (int64_t j0 = 0; j0 < nc; j0 += NR) {  // B stored [N,K]: transpose 16-column halves
    const int64_t cols = nc - j0 < NR ? nc - j0 : NR;
    const TS* s = B + j0 * ldb;
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
  static const GemmKernels<float> k{MR, NR, KC, MC, kBElems, &micro, &pack_a<float>, &pack_b<float>};
  return k;
}

const GemmKernels<float, float, BFloat16>& gemm_kernels_avx512_widened() {
  static const GemmKernels<float, float, BFloat16> k{
      MR, NR, KC, MC, kBElems, &micro, &pack_a<BFloat16>, &pack_b<BFloat16>, 1, nullptr, &micro_bf16_out};
  return k;
}

}  // namespace uoe::cpu::detail
