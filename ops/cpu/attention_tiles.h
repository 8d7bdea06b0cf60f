// Tile building blocks of the CPU fused attention (ops/cpu/attention_kernels.cpp): per-ISA target macros, SIMD
// helpers on GCC vectors (with a vector exp), the register-blocked small GEMM on tiles with its per-ISA entry points,
// and tile packing. Private to that file.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/half.h"

#define UOE_ATTN_INLINE inline __attribute__((always_inline))
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define UOE_ATTN_X86 1
#define UOE_ATTN_V4 __attribute__((target("arch=x86-64-v4")))
#define UOE_ATTN_V3 __attribute__((target("arch=x86-64-v3")))
#else
#define UOE_ATTN_X86 0
#endif

namespace uoe::cpu {
namespace {

// ---------------------------------------------------------------------------------------------------------
// SIMD helpers on GCC vector extensions. VB = vector bytes: 64 (AVX-512), 32 (AVX2), 16 (SSE2 / other).
// Helpers take vectors by reference (never by value) so no vector ABI crosses a function boundary.
// `x - V{}` broadcasts the scalar x: subtracting +0 is exact and folds away (adding +0 would not, because of −0).
template <typename T, int VB>
struct Simd {
  static constexpr int W = VB / int(sizeof(T));
  typedef T V __attribute__((vector_size(VB)));

  static UOE_ATTN_INLINE void load(V& v, const T* p) { std::memcpy(&v, p, sizeof(V)); }
  static UOE_ATTN_INLINE void store(T* p, const V& v) { std::memcpy(p, &v, sizeof(V)); }
  static UOE_ATTN_INLINE void iota(V& v, int base) { for (int l = 0; l < W; ++l) v[l] = T(base + l); }
  // x = exp(x) lane-wise. float: exp(x) = 2^n · e^r with n = round(x·log2 e), r = x − n·ln2 (Cody–Waite two-part
  // ln2), e^r by its degree-7 Taylor polynomial on |r| ≤ ln2/2 (truncation < 1e-8, total ≈ 1e-7 relative);
  // x < −87.33 (below FLT_MIN, including −inf) gives 0, NaN propagates. double: std::exp per lane.
  static UOE_ATTN_INLINE void exp(V& x) {
    if constexpr (std::is_same_v<T, float>) {
      typedef int32_t VI __attribute__((vector_size(VB)));
      const V lo = -87.33f - V{}, hi = 88.0f - V{}, magic = 12582912.0f - V{};  // 1.5·2^23 rounds to integer
      const auto under = x < lo;
      V xc = under ? lo : x;
      xc = xc > hi ? hi : xc;
      const V n = (xc * 1.44269504088896341f + magic) - magic;
      V r = xc - n * 0.693145751953125f;  // exact product: the high part of ln2 has 16 significant bits
      r = r - n * 1.42860682030941723212e-6f;
      V p = (1.0f / 5040.0f) - V{};
      p = p * r + (1.0f / 720.0f);
      p = p * r + (1.0f / 120.0f);
      p = p * r + (1.0f / 24.0f);
      p = p * r + (1.0f / 6.0f);
      p = p * r + 0.5f;
      p = p * r + 1.0f;
      p = p * r + 1.0f;
      const VI bits = (__builtin_convertvector(n, VI) + 127) << 23;
      V two_n;
      std::memcpy(&two_n, &bits, sizeof(V));
      x = under ? V{} : p * two_n;
    } else {
      for (int l = 0; l < W; ++l) x[l] = std::exp(x[l]);
    }
  }
};

// ---------------------------------------------------------------------------------------------------------
// Online softmax pieces on W query columns of transposed scores (key rows j, query columns; lane l is query i0+l'
// of the block's first column). Under the causal mask key j0+j is visible to query i0+i iff i0+i >= j0+j, i.e. lane
// idx[l] sees key row j iff idx[l] >= off + j with off = j0 - i0; diag says whether any pair of the block is masked.

// s = exp(s·sc − sub) for key row j, 0 where masked.
template <typename T, int VB>
UOE_ATTN_INLINE void exp_scores(typename Simd<T, VB>::V& s, const typename Simd<T, VB>::V& sc,
                                const typename Simd<T, VB>::V& sub, const typename Simd<T, VB>::V& idx, bool diag,
                                int64_t off, int j) {
  using V = typename Simd<T, VB>::V;
  s = s * sc - sub;
  Simd<T, VB>::exp(s);
  if (diag) s = idx >= T(off + j) - V{} ? s : V{};
}

// The forward's block statistics from the running max m: mx = max(m, column max of sc·s over the kn key rows at
// ST (row stride ld)), ms = mx or 0 where the column is fully masked (p = 0 there, alpha = 1 harmless), and
// alpha = exp(m − ms), the rescale of what was summed so far.
template <typename T, int VB>
UOE_ATTN_INLINE void column_max(typename Simd<T, VB>::V& mx, typename Simd<T, VB>::V& ms,
                                typename Simd<T, VB>::V& alpha, const T* m, const T* ST, int64_t ld, int kn,
                                const typename Simd<T, VB>::V& sc, const typename Simd<T, VB>::V& idx, bool diag,
                                int64_t off) {
  using S = Simd<T, VB>;
  using V = typename S::V;
  const V ninf = -std::numeric_limits<T>::infinity() - V{};
  V mo;
  S::load(mo, m);
  mx = mo;
  for (int j = 0; j < kn; ++j) {  // column max over the kn keys
    V s;
    S::load(s, ST + j * ld);
    s *= sc;
    if (diag) s = idx >= T(off + j) - V{} ? s : ninf;
    mx = mx > s ? mx : s;
  }
  ms = mx == ninf ? V{} : mx;
  alpha = mo - ms;
  S::exp(alpha);
}

// Ends a block: l = alpha·l + sum, m = mx, and alpha stored for the rescale of the output rows.
template <typename T, int VB>
UOE_ATTN_INLINE void update_stats(T* m, T* l, T* alpha_out, const typename Simd<T, VB>::V& mx,
                                  const typename Simd<T, VB>::V& alpha, const typename Simd<T, VB>::V& sum) {
  using S = Simd<T, VB>;
  typename S::V lo;
  S::load(lo, l);
  lo = alpha * lo + sum;
  S::store(l, lo);
  S::store(m, mx);
  S::store(alpha_out, alpha);
}

// ---------------------------------------------------------------------------------------------------------
// Small GEMM on tiles: C[M×N] = init + A[M×K] · B[K×N]. A(i,k) = A[i·ars + k·acs] (strides let A be a
// transposed tile or rows of an input tensor), B rows are contiguous with leading dimension ldb, N % W == 0.
// mode 0: init = 0; mode 1: init = C; mode 2: init = rs[i] · C (online-softmax rescale of the output rows).
// (The bfloat16 tiles, attention_bf16_tiles.h, use the same arguments with TA = BFloat16, TC = float.)
template <typename TA, typename TC = TA>
struct GemmArgs {
  int M, N, K;
  const TA* A;
  int64_t ars, acs;
  const TA* B;
  int64_t ldb;
  TC* C;
  int64_t ldc;
  int mode;
  const TC* rs;
};

// Register-blocked micro kernel: R rows × CV vectors of C held in registers across the whole K loop.
template <typename T, int VB, int R, int CV>
UOE_ATTN_INLINE void gemm_micro(int K, const T* A, int64_t ars, int64_t acs, const T* B, int64_t ldb, T* C, int64_t ldc,
                                int mode, const T* rs) {
  using S = Simd<T, VB>;
  using V = typename S::V;
  constexpr int W = S::W;
  V acc[R][CV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < CV; ++c) {
      if (mode == 0) {
        acc[r][c] = V{};
      } else {
        S::load(acc[r][c], C + r * ldc + c * W);
        if (mode == 2) acc[r][c] *= rs[r];
      }
    }
  }
  for (int k = 0; k < K; ++k) {  // reduction: acc[r][:] += A(r,k) · B[k, :]
    V b[CV];
#pragma GCC unroll 16
    for (int c = 0; c < CV; ++c) S::load(b[c], B + k * ldb + c * W);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const V a = A[r * ars + k * acs] - V{};
#pragma GCC unroll 16
      for (int c = 0; c < CV; ++c) acc[r][c] += a * b[c];
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < CV; ++c) S::store(C + r * ldc + c * W, acc[r][c]);
  }
}

// All rows of one column strip of CV vectors: blocks of R rows, then single rows.
template <typename T, int VB, int R, int CV>
UOE_ATTN_INLINE void gemm_strip(const GemmArgs<T>& g, int c0) {
  int i = 0;
  for (; i + R <= g.M; i += R)  // [R rows] × [CV·W cols]
    gemm_micro<T, VB, R, CV>(g.K, g.A + i * g.ars, g.ars, g.acs, g.B + c0, g.ldb, g.C + i * g.ldc + c0, g.ldc, g.mode,
                             g.rs ? g.rs + i : nullptr);
  for (; i < g.M; ++i)  // leftover rows one at a time
    gemm_micro<T, VB, 1, CV>(g.K, g.A + i * g.ars, g.ars, g.acs, g.B + c0, g.ldb, g.C + i * g.ldc + c0, g.ldc, g.mode,
                             g.rs ? g.rs + i : nullptr);
}

template <typename T, int VB>
UOE_ATTN_INLINE void gemm_impl(const GemmArgs<T>& g) {
  constexpr int W = Simd<T, VB>::W;
  // Register block: R rows × CV vectors, R·CV accumulators (16 zmm of 32 with AVX-512, 8 of 16 otherwise).
  constexpr int R = 4;
  constexpr int CV = VB == 64 ? 4 : 2;
  for (int c0 = 0; c0 < g.N; c0 += CV * W) {  // column strips of up to CV vectors
    const int nv = std::min(CV, (g.N - c0) / W);
    if (nv == CV) {
      gemm_strip<T, VB, R, CV>(g, c0);
    } else if (nv == 1) {
      gemm_strip<T, VB, R, 1>(g, c0);
    } else if constexpr (CV == 4) {
      if (nv == 2)
        gemm_strip<T, VB, R, 2>(g, c0);
      else
        gemm_strip<T, VB, R, 3>(g, c0);
    }
  }
}

// One out-of-line GEMM per instruction set; the task bodies (attention_kernels.cpp) are inlined into per-ISA
// wrappers and call the GEMM of their own ISA.
#if UOE_ATTN_X86
template <typename T>
UOE_ATTN_V4 __attribute__((noinline)) void gemm_v4(const GemmArgs<T>& g) { gemm_impl<T, 64>(g); }
template <typename T>
UOE_ATTN_V3 __attribute__((noinline)) void gemm_v3(const GemmArgs<T>& g) { gemm_impl<T, 32>(g); }
#endif
template <typename T>
__attribute__((noinline)) void gemm_v1(const GemmArgs<T>& g) { gemm_impl<T, 16>(g); }

template <typename T, int VB>
UOE_ATTN_INLINE void gemm(int M, int N, int K, const T* A, int64_t ars, int64_t acs, const T* B, int64_t ldb, T* C,
                          int64_t ldc, int mode, const T* rs = nullptr) {
  const GemmArgs<T> g{M, N, K, A, ars, acs, B, ldb, C, ldc, mode, rs};
#if UOE_ATTN_X86
  if constexpr (VB == 64) return gemm_v4<T>(g);
  if constexpr (VB == 32) return gemm_v3<T>(g);
#endif
  gemm_v1<T>(g);
}

// ---------------------------------------------------------------------------------------------------------
// Packing, from elements stored as E (T itself, or bfloat16 widened exactly to float T).
// dst[d·ld + r] = src[r·stride + d] for r < n, d < Dh; columns r in [n, ld) are zero.
template <typename T, typename E>
UOE_ATTN_INLINE void pack_transposed(T* dst, int ld, const E* src, int64_t stride, int n, int64_t Dh) {
  if (n < ld) std::memset(dst, 0, sizeof(T) * size_t(Dh) * size_t(ld));
  for (int r = 0; r < n; ++r) {  // [n rows][Dh] -> [Dh][ld]
    const E* s = src + r * stride;
    for (int64_t d = 0; d < Dh; ++d) dst[d * ld + r] = T(s[d]);
  }
}
// dst[r·ld + d] = src[r·stride + d] for r < n, d < Dh; columns [Dh, ld) are zero.
template <typename T, typename E>
UOE_ATTN_INLINE void pack_rows(T* dst, int64_t ld, const E* src, int64_t stride, int n, int64_t Dh) {
  for (int r = 0; r < n; ++r) {  // [n rows][Dh] -> [n rows][ld]
    if constexpr (std::is_same_v<T, E>) {
      std::memcpy(dst + r * ld, src + r * stride, sizeof(T) * size_t(Dh));
    } else {
      const E* s = src + r * stride;
#pragma omp simd
      for (int64_t d = 0; d < Dh; ++d) dst[r * ld + d] = T(s[d]);
    }
    std::memset(dst + r * ld + Dh, 0, sizeof(T) * size_t(ld - Dh));
  }
}
// n rows of Dh elements (row stride `stride`) as T rows for the tile GEMM, their leading dimension in ld: in place
// when E is T and `in_place` (a B operand needs Dh % W == 0), else widened and padded into buf (ld = Dhp).
template <typename T, typename E>
UOE_ATTN_INLINE const T* rows_as(T* buf, int64_t Dhp, const E* src, int64_t stride, int n, int64_t Dh, bool in_place,
                                 int64_t& ld) {
  if constexpr (std::is_same_v<T, E>) {
    if (in_place) {
      ld = stride;
      return src;
    }
  }
  pack_rows(buf, Dhp, src, stride, n, Dh);
  ld = Dhp;
  return buf;
}
// dst[0:n] = mul · src[0:n], rounded once to E (a bfloat16 written as its bits, which GCC vectorises).
template <typename T, typename E>
UOE_ATTN_INLINE void store_scaled(E* dst, const T* src, int64_t n, T mul) {
  if constexpr (std::is_same_v<T, E>) {
#pragma omp simd
    for (int64_t d = 0; d < n; ++d) dst[d] = src[d] * mul;
  } else {
#pragma omp simd
    for (int64_t d = 0; d < n; ++d) dst[d].bits = float_to_bf16_bits(src[d] * mul);
  }
}

}  // namespace
}  // namespace uoe::cpu
