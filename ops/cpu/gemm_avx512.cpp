// AVX-512 float GEMM building blocks: 14x32 register-tiled micro-kernel and vectorised packing.
#include "ops/cpu/gemm_avx512_blocks.h"
#include "ops/cpu/gemm_isa.h"

namespace uoe::cpu::detail {
namespace {

using avx512::gather_transpose;
using avx512::kAll;
using avx512::mask_first;
using avx512::store_row;

constexpr int MR = 14;
constexpr int NR = 32;
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

// R rows (R <= MR) of the MR x 32 tile. Each C element is an FMA chain over k in ascending
// order whatever R is, so edge tiles give the same bits as full ones.
template <int R>
UOE_AVX512 void micro_rows(int64_t kc, const float* a, const float* b, float* c, int64_t ldc, int nr,
                           float alpha, float beta) {
  __m512 c0[R], c1[R];
  avx512::zero_rows<R>(c0, c1);
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
