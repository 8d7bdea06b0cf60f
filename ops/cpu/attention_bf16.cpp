// CPU fused attention on bfloat16 tensors: the tiled online-softmax forward of attention_kernels.cpp and a one-pass
// backward, every product on bfloat16 pairs (VDPBF16PS) and the softmax statistics in float32; where the CPU has no
// AVX512-BF16, the float kernels of attention_kernels.cpp on the bfloat16 tensors.

#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "ops/cpu/attention_tasks.h"
#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/gemm_isa.h"
#include "ops/cpu/scratch.h"
#include "ops/kernels/attention.h"
#if UOE_ATTN_X86
#include "ops/cpu/attention_bf16_tiles.h"
#endif

namespace uoe::cpu {
namespace {

using BCtx = Ctx<float, BFloat16>;

// Whether the bf16 kernels run on VDPBF16PS: the CPU has AVX512-BF16 and the bfloat16 GEMM path is not f32 (an AMX
// CPU has AVX512-BF16 too; an Intel CPU without AMX takes the f32 path, preferred_bf16_isa).
bool use_dpbf16() {
#if UOE_ATTN_X86
  using detail::Bf16Isa;
  return detail::gemm_bf16_active_isa() != Bf16Isa::F32 && detail::gemm_bf16_isa_supported(Bf16Isa::Avx512Bf16);
#else
  return false;
#endif
}

#if UOE_ATTN_X86
// ---------------------------------------------------------------------------------------------------------
// The VDPBF16PS tasks: the tile loops and masking of attention_kernels.cpp; one task per (b, h, query block) for
// the forward, per (b, kv head) for the whole backward (dk, dv and the group's dq); W = 16 float lanes.
using F = Simd<float, 64>;
using V = F::V;
constexpr int W = F::W;

using detail::Carve;

// Workspace bytes per thread, an upper bound for both task kinds (the backward's dQ of its group on top): at most 7
// bfloat16 tiles of 64 × max(Dhp, Dh + 1) and 3 of 64 × 64, 2 float tiles of 64 × Dhp and 2 of 64 × 64, 3 float
// vectors of 64, the alignment of 16 arrays.
size_t workspace_bytes(int64_t Dh) {
  const size_t dhp = size_t((Dh + 15) / 16 * 16), tile = size_t(kBq) * kBk;
  return 2 * (7 * 64 * (dhp + 1) + 3 * tile) + 4 * (2 * 64 * dhp + 2 * tile + 3 * 64) + 16 * 64;
}

void gemm16(int M, int N, int K2, const BFloat16* A, int64_t ars, int64_t aps, const BFloat16* B, int64_t ldb,
            float* C, int64_t ldc, int mode, const float* rs = nullptr) {
  bf16_gemm(Bf16GemmArgs{M, N, K2, A, ars, aps, B, ldb, C, ldc, mode, rs});
}

// n rows of Dh elements (row stride `stride`) as the A operand of gemm16 (pairs along the row): in place when Dh
// is even, else copied into buf (rows Dh + 1 long, the last element zero).
struct Rows {
  const BFloat16* p;
  int64_t stride;
};
UOE_ATTN_INLINE Rows pair_rows(const BFloat16* src, int64_t stride, int n, int64_t Dh, BFloat16* buf) {
  if (Dh % 2 == 0) return {src, stride};
  pack_rows(buf, Dh + 1, src, stride, n, Dh);
  return {buf, Dh + 1};
}

// dst[0:n] = bfloat16(mul · src[0:n]).
UOE_ATTN_BF16 void store_scaled_bf16(BFloat16* dst, const float* src, int64_t n, float mul) {
  const __m512 m = _mm512_set1_ps(mul);
  for (int64_t d = 0; d < n; d += 16) {
    const __mmask16 k = n - d >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (n - d)) - 1);
    const __m512 x = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, src + d), m);
    _mm256_mask_storeu_epi16(dst + d, k, (__m256i)_mm512_cvtneps_pbh(x));
  }
}

// Forward task: one (b, h, query block). S^T = K_blk · Q_blk^T (key rows × query columns), the online softmax down
// the columns; P^T goes to bfloat16 pairs of keys, O = diag(alpha)·O + P · V_blk.
UOE_ATTN_BF16 void fwd_task(const BCtx& c, int64_t task, std::byte* ws) {
  const int64_t Dh = c.Dh, Dh2 = (Dh + 1) / 2, Dhp = (Dh + W - 1) / W * W;
  const auto [b, h, hk, i0, qn] = query_block(c, task);

  Carve w{ws};
  BFloat16* QP = w.take<BFloat16>(Dh2 * 2 * kBq);  // [Dh2][kBq] pairs of Q^T
  BFloat16* PP = w.take<BFloat16>(kBk * kBq);      // [kBk/2][kBq] pairs (of keys) of P^T
  BFloat16* VP = w.take<BFloat16>(kBk * Dhp);      // [kBk/2][Dhp] pairs (of keys) of V
  BFloat16* Kb = w.take<BFloat16>(kBk * (Dh + 1));  // [kBk][Dh+1] K rows when Dh is odd
  float* ST = w.take<float>(kBk * kBq);            // [kBk][kBq] scores, transposed
  float* O = w.take<float>(kBq * Dhp);             // [kBq][Dhp] unnormalised output rows
  float* m = w.take<float>(kBq);                   // running max
  float* l = w.take<float>(kBq);                   // running sum
  float* alpha = w.take<float>(kBq);               // rescale of O for the current key block

  pack_pairs_transposed(QP, kBq, c.q_row(b, h, i0), c.qs.time, qn, Dh);
  for (int i = 0; i < kBq; ++i) m[i] = -std::numeric_limits<float>::infinity(), l[i] = 0.0f;
  const V sc = c.scale - V{};

  const int64_t nk = c.causal ? ceil_div(i0 + qn, kBk) : c.nkb;  // causal: blocks above the diagonal skipped
  for (int64_t kb = 0; kb < nk; ++kb) {
    const int64_t j0 = kb * kBk;
    const int kn = block_rows(c.len, j0, kBk);
    const Rows kr = pair_rows(c.k_row(b, hk, j0), c.ks.time, kn, Dh, Kb);
    gemm16(kn, kBq, int(Dh2), kr.p, kr.stride, 2, QP, kBq, ST, kBq, 0);  // ST[kn × kBq] = K · Q^T
    const bool diag = c.causal && j0 + kn - 1 > i0;  // some (query, key) pairs of this block are masked
    for (int cv = 0; cv < kBq / W; ++cv) {  // W query columns at a time
      V idx, mx, ms, a, sum = V{};
      F::iota(idx, cv * W);
      column_max<float, 64>(mx, ms, a, m + cv * W, ST + cv * W, kBq, kn, sc, idx, diag, j0 - i0);
      for (int j = 0; j < kn; j += 2) {  // p = exp(s·scale − max), column sums; P^T pairs (key j, key j+1)
        V p[2] = {V{}, V{}};
        for (int e = 0; e < 2 && j + e < kn; ++e) {
          F::load(p[e], ST + (j + e) * kBq + cv * W);
          exp_scores<float, 64>(p[e], sc, ms, idx, diag, j0 - i0, j + e);
          sum += p[e];
        }
        _mm512_storeu_si512(PP + ((j / 2) * kBq + cv * W) * 2, round_pairs(__m512(p[0]), __m512(p[1])));
      }
      update_stats<float, 64>(m + cv * W, l + cv * W, alpha + cv * W, mx, a, sum);
    }
    pack_vnni(VP, Dhp, c.v_row(b, hk, j0), c.vs.time, kn, Dh);
    // O[qn × Dhp] = alpha ⊙ O + P[qn × kn] · V[kn × Dhp]
    gemm16(qn, int(Dhp), (kn + 1) / 2, PP, 2, 2 * kBq, VP, Dhp, O, Dhp, kb == 0 ? 0 : 2, alpha);
  }
  BFloat16* op = c.out + b * c.os.batch + h * c.os.head + i0 * c.os.time;
  float* lp = c.lse_out + (b * c.H + h) * c.len + i0;
  for (int i = 0; i < qn; ++i) {  // out = O / l, lse = m + log l
    store_scaled_bf16(op + i * c.os.time, O + i * Dhp, Dh, 1.0f / l[i]);
    lp[i] = m[i] + std::log(l[i]);
  }
}

// Backward task: one (b, kv head) → the dk, dv rows of its key blocks and the dq rows of the q heads of its group.
// Key blocks in ascending order; for each, the query blocks that see it in a fixed order: S = Q_blk · K_blk^T
// (query rows × key columns), dP = dO · V^T; P and dS go to bfloat16 pairs of queries for dV += P^T · dO and
// dK += dS^T · Q, and dS to bfloat16 rows (pairs of keys) for dQ += dS · K_blk, summed over the key blocks in
// ascending order in the task's float32 dQ of the whole group (no second pass recomputing S and dP for dq).
UOE_ATTN_BF16 void bwd_task(const BCtx& c, int64_t task, std::byte* ws) {
  const int64_t Dh = c.Dh, Dh2 = (Dh + 1) / 2, Dhp = (Dh + W - 1) / W * W;
  const int64_t b = task / c.Hkv, hk = task % c.Hkv;

  Carve w{ws};
  BFloat16* KP = w.take<BFloat16>(Dh2 * 2 * kBk);   // [Dh2][kBk] pairs of K^T
  BFloat16* VPt = w.take<BFloat16>(Dh2 * 2 * kBk);  // [Dh2][kBk] pairs of V^T
  BFloat16* KV = w.take<BFloat16>(kBk * Dhp);       // [kBk/2][Dhp] pairs (of keys) of K
  BFloat16* PP = w.take<BFloat16>(kBq * kBk);       // [kBq/2][kBk] pairs (of queries) of P
  BFloat16* dSP = w.take<BFloat16>(kBq * kBk);      // [kBq/2][kBk] pairs (of queries) of dS
  BFloat16* dSR = w.take<BFloat16>(kBq * kBk);      // [kBq][kBk] rows of dS: pairs of keys
  BFloat16* Qb = w.take<BFloat16>(kBq * (Dh + 1));   // [kBq][Dh+1] Q rows when Dh is odd
  BFloat16* dOb = w.take<BFloat16>(kBq * (Dh + 1));  // [kBq][Dh+1] dO rows when Dh is odd
  BFloat16* QV = w.take<BFloat16>(kBq * Dhp);       // [kBq/2][Dhp] pairs (of queries) of Q
  BFloat16* dOV = w.take<BFloat16>(kBq * Dhp);      // [kBq/2][Dhp] pairs (of queries) of dO
  float* P = w.take<float>(kBq * kBk);              // [kBq][kBk] scores, then probabilities
  float* dS = w.take<float>(kBq * kBk);             // [kBq][kBk] dP
  float* dK = w.take<float>(kBk * Dhp);             // [kBk][Dhp]
  float* dV = w.take<float>(kBk * Dhp);             // [kBk][Dhp]
  float* dQ = w.take<float>(c.G * c.len * Dhp);     // [G][len][Dhp]: the group's q heads

  const V sc = c.scale - V{};
  for (int64_t j0 = 0; j0 < c.len; j0 += kBk) {
    const int kn = block_rows(c.len, j0, kBk);
    pack_pairs_transposed(KP, kBk, c.k_row(b, hk, j0), c.ks.time, kn, Dh);
    pack_pairs_transposed(VPt, kBk, c.v_row(b, hk, j0), c.vs.time, kn, Dh);
    pack_vnni(KV, Dhp, c.k_row(b, hk, j0), c.ks.time, kn, Dh);
    bool first = true;
    const KeyBlockQueries queries = queries_of(c, hk, j0);
    for (int64_t n = 0; n < queries.count(); ++n) {  // the query blocks that see this key block, fixed order
      const auto [h, i0, qn] = queries.at(n);
      const BFloat16* qp = c.q_row(b, h, i0);
      const BFloat16* dop = c.dout_row(b, h, i0);
      const float* lse = c.lse_row(b, h, i0);
      const float* dsum = c.dsum_row(b, h, i0);
      const Rows qr = pair_rows(qp, c.qs.time, qn, Dh, Qb), dor = pair_rows(dop, c.dos.time, qn, Dh, dOb);
      gemm16(qn, kBk, int(Dh2), qr.p, qr.stride, 2, KP, kBk, P, kBk, 0);     // P[qn × kBk] = Q · K^T
      gemm16(qn, kBk, int(Dh2), dor.p, dor.stride, 2, VPt, kBk, dS, kBk, 0);  // dS[qn × kBk] = dO · V^T (= dP)
      const bool diag = c.causal && j0 + kn - 1 > i0;
      for (int i = 0; i < qn; i += 2) {  // rows i, i+1: p = exp(s·scale − lse), ds = p ⊙ (dp − D), as pairs
        for (int cv = 0; cv < kBk / W; ++cv) {
          V p[2] = {V{}, V{}}, ds[2] = {V{}, V{}};
          for (int e = 0; e < 2 && i + e < qn; ++e) {
            V dp, idx;
            F::load(p[e], P + (i + e) * kBk + cv * W);
            F::load(dp, dS + (i + e) * kBk + cv * W);
            p[e] = p[e] * sc - lse[i + e];
            F::exp(p[e]);
            if (diag) {
              F::iota(idx, cv * W);
              p[e] = idx <= float(i0 + i + e - j0) - V{} ? p[e] : V{};
            }
            ds[e] = p[e] * (dp - dsum[i + e]);
            _mm256_storeu_si256(reinterpret_cast<__m256i*>(dSR + (i + e) * kBk + cv * W),
                                (__m256i)_mm512_cvtneps_pbh(__m512(ds[e])));
          }
          _mm512_storeu_si512(PP + ((i / 2) * kBk + cv * W) * 2, round_pairs(__m512(p[0]), __m512(p[1])));
          _mm512_storeu_si512(dSP + ((i / 2) * kBk + cv * W) * 2, round_pairs(__m512(ds[0]), __m512(ds[1])));
        }
      }
      pack_vnni(QV, Dhp, qp, c.qs.time, qn, Dh);
      pack_vnni(dOV, Dhp, dop, c.dos.time, qn, Dh);
      // dV[kn × Dhp] += P^T[kn × qn] · dO[qn × Dhp] ; dK[kn × Dhp] += dS^T · Q
      gemm16(kn, int(Dhp), (qn + 1) / 2, PP, 2, 2 * kBk, dOV, Dhp, dV, Dhp, first ? 0 : 1);
      gemm16(kn, int(Dhp), (qn + 1) / 2, dSP, 2, 2 * kBk, QV, Dhp, dK, Dhp, first ? 0 : 1);
      // dQ[qn × Dhp] += dS[qn × kn] · K[kn × Dhp] (every query block sees key block 0 first)
      float* dq_rows = dQ + ((h - hk * c.G) * c.len + i0) * Dhp;
      gemm16(qn, int(Dhp), (kn + 1) / 2, dSR, kBk, 2, KV, Dhp, dq_rows, Dhp, j0 == 0 ? 0 : 1);
      first = false;
    }
    if (first) std::fill(dK, dK + kBk * Dhp, 0.0f), std::fill(dV, dV + kBk * Dhp, 0.0f);  // no query sees it
    BFloat16* dkp = c.dk + b * c.dks.batch + hk * c.dks.head + j0 * c.dks.time;
    BFloat16* dvp = c.dv + b * c.dvs.batch + hk * c.dvs.head + j0 * c.dvs.time;
    for (int j = 0; j < kn; ++j) {  // dk = scale · dK, dv = dV
      store_scaled_bf16(dkp + j * c.dks.time, dK + j * Dhp, Dh, c.scale);
      store_scaled_bf16(dvp + j * c.dvs.time, dV + j * Dhp, Dh, 1.0f);
    }
  }
  for (int64_t g = 0; g < c.G; ++g) {  // dq = scale · dQ
    BFloat16* dqp = c.dq + b * c.dqs.batch + (hk * c.G + g) * c.dqs.head;
    for (int64_t t = 0; t < c.len; ++t)
      store_scaled_bf16(dqp + t * c.dqs.time, dQ + (g * c.len + t) * Dhp, Dh, c.scale);
  }
}

template <typename Task>
void run_bf16_tasks(const BCtx& c, int64_t ntask, size_t ws_bytes, Task task) {
  run_parallel(ntask, ws_bytes, [&](int64_t t, std::byte* ws) { task(c, t, ws); });
}
#endif  // UOE_ATTN_X86

}  // namespace

const char* attention_bf16_path() { return use_dpbf16() ? "avx512_bf16" : "f32"; }

void attention_forward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                            const BFloat16* v, AttnStrides vs, BFloat16* out, AttnStrides os, float* lse) {
  [[maybe_unused]] BCtx c = make_ctx<float, BFloat16>(s);
  if (s.B == 0 || s.T == 0) return;
  if (s.Dh == 0) return lse_of_empty_heads(s, lse);
#if UOE_ATTN_X86
  if (use_dpbf16()) {
    c.q = q, c.k = k, c.v = v, c.qs = qs, c.ks = ks, c.vs = vs, c.out = out, c.os = os, c.lse_out = lse;
    return run_bf16_tasks(c, c.B * c.H * c.nqb, workspace_bytes(c.Dh), fwd_task);
  }
#endif
  attention_forward_f32_kernels(s, q, qs, k, ks, v, vs, out, os, lse);
}

void attention_backward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                             const BFloat16* v, AttnStrides vs, const BFloat16* out, AttnStrides os, const float* lse,
                             const BFloat16* dout, AttnStrides dos, BFloat16* dq, AttnStrides dqs, BFloat16* dk,
                             AttnStrides dks, BFloat16* dv, AttnStrides dvs) {
  [[maybe_unused]] BCtx c = make_ctx<float, BFloat16>(s);
  if (s.B == 0 || s.T == 0 || s.Dh == 0) return;  // nothing to write
#if UOE_ATTN_X86
  if (use_dpbf16()) {
    c.q = q, c.k = k, c.v = v, c.lse_in = lse, c.dout = dout;
    c.qs = qs, c.ks = ks, c.vs = vs, c.os = os, c.dos = dos, c.dqs = dqs, c.dks = dks, c.dvs = dvs;
    c.dq = dq, c.dk = dk, c.dv = dv;
    const std::vector<float> dsum = dout_out_row_sums(c, out, os, dout, dos);
    c.dsum = dsum.data();
    const size_t dq_bytes = Carve::bytes<float>(c.G * c.len * ((c.Dh + W - 1) / W * W));
    return run_bf16_tasks(c, c.B * c.Hkv, workspace_bytes(c.Dh) + dq_bytes, bwd_task);
  }
#endif
  attention_backward_f32_kernels(s, q, qs, k, ks, v, vs, out, os, lse, dout, dos, dq, dqs, dk, dks, dv, dvs);
}

}  // namespace uoe::cpu
