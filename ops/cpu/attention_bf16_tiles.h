// Tile building blocks of the CPU bfloat16 fused attention (ops/cpu/attention_bf16.cpp): the small GEMM on
// bfloat16 pairs with float32 sums (VDPBF16PS, AVX512-BF16), the pair layouts it reads, and their packing.
// Private to that file; x86-64 with GCC only (UOE_ATTN_X86, ops/cpu/attention_tiles.h).
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "core/half.h"
#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/gemm_avx512_blocks.h"

// x86-64-v4 (AVX-512 F/BW/DQ/VL, FMA) plus the bfloat16 dot product.
#define UOE_ATTN_BF16 __attribute__((target("arch=x86-64-v4,avx512bf16")))

namespace uoe::cpu {
namespace {

// Pair layouts. A pair is two bfloat16 of consecutive k (the reduction index) in one 32-bit word, low half first;
// VDPBF16PS adds both products of each of 16 pairs to 16 float sums.
//   rows:  pair p of row i at base + i·rs + p·ps (bf16 elements), e.g. a row-major tile with ps = 2.
//   VNNI:  pair p of column j at base + (p·ld + j)·2: one vector load gives 16 columns' pairs.
// Small GEMM: C[M×N] (float) = init + A[M×K] · B[K×N] over K pairs (GemmArgs::K counts pairs, acs is the pair
// stride of A); A in rows layout, B in VNNI layout with N % 16 == 0 columns readable; mode 0: init = 0, 1: init = C,
// 2: init = rs[i] · C.
using Bf16GemmArgs = GemmArgs<BFloat16, float>;

UOE_ATTN_INLINE uint32_t load_pair(const BFloat16* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// R rows × CV vectors of 16 columns held in registers across the K loop; each sum is one VDPBF16PS chain over the
// pairs in ascending order, the same for every R and CV (edge tiles give the bits of full ones).
template <int R, int CV>
UOE_ATTN_BF16 UOE_ATTN_INLINE void bf16_micro(const Bf16GemmArgs& g, int i0, int c0) {
  __m512 acc[R][CV];
  const float* rs = g.rs ? g.rs + i0 : nullptr;
  float* C = g.C + i0 * g.ldc + c0;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < CV; ++c) {
      acc[r][c] = g.mode == 0 ? _mm512_setzero_ps() : _mm512_loadu_ps(C + r * g.ldc + c * 16);
      if (g.mode == 2) acc[r][c] = _mm512_mul_ps(acc[r][c], _mm512_set1_ps(rs[r]));
    }
  }
  const BFloat16* A = g.A + i0 * g.ars;
  const BFloat16* B = g.B + 2 * c0;
  for (int p = 0; p < g.K; ++p) {  // acc[r][:] += pair(A(r, 2p..2p+1)) · B[2p..2p+1, :]
    __m512bh b[CV];
#pragma GCC unroll 16
    for (int c = 0; c < CV; ++c) b[c] = (__m512bh)_mm512_loadu_si512(B + 2 * (p * g.ldb + c * 16));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512bh a = (__m512bh)_mm512_set1_epi32(int(load_pair(A + r * g.ars + p * g.acs)));
#pragma GCC unroll 16
      for (int c = 0; c < CV; ++c) acc[r][c] = _mm512_dpbf16_ps(acc[r][c], a, b[c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < CV; ++c) _mm512_storeu_ps(C + r * g.ldc + c * 16, acc[r][c]);
  }
}

// All rows of one column strip of CV vectors: blocks of 4 rows, then single rows.
template <int CV>
UOE_ATTN_BF16 UOE_ATTN_INLINE void bf16_strip(const Bf16GemmArgs& g, int c0) {
  int i = 0;
  for (; i + 4 <= g.M; i += 4) bf16_micro<4, CV>(g, i, c0);
  for (; i < g.M; ++i) bf16_micro<1, CV>(g, i, c0);
}

UOE_ATTN_BF16 __attribute__((noinline)) void bf16_gemm(const Bf16GemmArgs& g) {
  for (int c0 = 0; c0 < g.N; c0 += 64) {  // column strips of up to 4 vectors (16 accumulators of 32 zmm)
    const int nv = std::min(4, (g.N - c0) / 16);
    if (nv == 4) bf16_strip<4>(g, c0);
    else if (nv == 3) bf16_strip<3>(g, c0);
    else if (nv == 2) bf16_strip<2>(g, c0);
    else bf16_strip<1>(g, c0);
  }
}

// The 16 32-bit words lo[l] | hi[l] << 16 of 16 bfloat16 each. (The masked forms of the widening and the shift:
// GCC 12's unmasked ones read an uninitialised register under -Wmaybe-uninitialized.)
UOE_ATTN_BF16 UOE_ATTN_INLINE __m512i pair_words(__m256i lo, __m256i hi) {
  const __mmask16 all = 0xFFFF;
  return _mm512_or_si512(_mm512_maskz_cvtepu16_epi32(all, lo),
                         _mm512_maskz_slli_epi32(all, _mm512_maskz_cvtepu16_epi32(all, hi), 16));
}

// The pairs (x[l], y[l]) of 16 floats each rounded to bfloat16 (nearest even), as 16 32-bit words.
UOE_ATTN_BF16 UOE_ATTN_INLINE __m512i round_pairs(__m512 x, __m512 y) {
  return pair_words((__m256i)_mm512_cvtneps_pbh(x), (__m256i)_mm512_cvtneps_pbh(y));
}

// The pairs (x[l], y[l]) of 16 bfloat16 each (the first `valid` lanes read at x and y, nullptr: zeros).
UOE_ATTN_BF16 UOE_ATTN_INLINE __m512i interleave_pairs(const BFloat16* x, const BFloat16* y, __mmask16 valid) {
  return pair_words(x ? _mm256_maskz_loadu_epi16(valid, x) : _mm256_setzero_si256(),
                    y ? _mm256_maskz_loadu_epi16(valid, y) : _mm256_setzero_si256());
}

// VNNI layout of n rows of Dh elements (row r at src + r·stride): pair p of column d at dst + (p·ld + d)·2 for
// p < ceil(n/2) and d < ld (ld % 16 == 0); columns past Dh and the row past an odd n are zero.
UOE_ATTN_BF16 UOE_ATTN_INLINE void pack_vnni(BFloat16* dst, int64_t ld, const BFloat16* src, int64_t stride, int n,
                                             int64_t Dh) {
  for (int r = 0; r < n; r += 2) {
    const BFloat16* x = src + r * stride;
    const BFloat16* y = r + 1 < n ? x + stride : nullptr;
    for (int64_t d = 0; d < ld; d += 16) {
      const int64_t valid = std::min<int64_t>(16, Dh - d);
      const __mmask16 m = valid >= 16 ? __mmask16(0xFFFF) : valid <= 0 ? 0 : __mmask16((1u << valid) - 1);
      _mm512_storeu_si512(dst + ((r / 2) * ld + d) * 2, interleave_pairs(x + d, y ? y + d : nullptr, m));
    }
  }
}

// Pairs of each row's consecutive elements, transposed: pair p of row r of src (elements 2p, 2p+1 of src + r·stride)
// at dst + (p·ld + r)·2 for p < ceil(Dh/2); the element past an odd Dh and columns r in [n, ld) are zero. With an
// even Dh and stride a pair is a 32-bit word of src: 16 rows at a time go through the 16 × 16 transpose of 32-bit
// lanes (16 rows' loads in flight at once; the word-by-word copy it replaced stalled on each row's first load).
UOE_ATTN_BF16 UOE_ATTN_INLINE void pack_pairs_transposed(BFloat16* dst, int ld, const BFloat16* src, int64_t stride,
                                                         int n, int64_t Dh) {
  const int64_t Dh2 = (Dh + 1) / 2;
  if (n < ld) std::memset(dst, 0, sizeof(BFloat16) * 2 * size_t(Dh2) * size_t(ld));
  if (Dh % 2 == 0 && stride % 2 == 0) {  // [n rows][Dh2 words] -> [Dh2][ld] words
    for (int r = 0; r < n; r += 16)
      detail::avx512::gather_transpose(reinterpret_cast<const float*>(src + r * stride), stride / 2,
                                       std::min(16, n - r), Dh2, reinterpret_cast<float*>(dst) + r, ld,
                                       detail::avx512::mask_first(ld - r));
    return;
  }
  for (int r = 0; r < n; ++r) {  // [n rows][Dh] -> [Dh2][ld][2]
    const BFloat16* s = src + r * stride;
    for (int64_t p = 0; p < Dh / 2; ++p) std::memcpy(dst + (p * ld + r) * 2, s + 2 * p, 2 * sizeof(BFloat16));
    if (Dh % 2) dst[((Dh2 - 1) * ld + r) * 2] = s[Dh - 1], dst[((Dh2 - 1) * ld + r) * 2 + 1] = BFloat16::from_bits(0);
  }
}

}  // namespace
}  // namespace uoe::cpu
