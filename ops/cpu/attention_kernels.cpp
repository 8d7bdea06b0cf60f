// CPU fused attention kernels: tiled online-softmax forward/backward, OpenMP-parallel, deterministic, ISA-dispatched.
#include "ops/kernels/attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/simd.h"
#include "ops/cpu/attention_tasks.h"
#include "ops/cpu/attention_tiles.h"

namespace uoe::cpu {
namespace {

// Workspace elements per thread (upper bound for every task kind and ISA).
size_t workspace_elems(int64_t Dh) {
  const size_t dhp = size_t((Dh + 15) / 16 * 16);
  return 6 * size_t(std::max(kBq, kBk)) * dhp + 4 * size_t(kBq) * kBk + 8 * size_t(kBq) + 64;
}

// Every task reads its operands as E (T itself, or bfloat16 with T = float: each tile widened as it is packed, no
// float32 copy of a tensor) and rounds each result once as it stores it.
//
// Forward task: one (b, h, query block). S^T = K_blk · Q_blk^T (key rows × query columns) so that the online
// softmax runs down the columns with whole vectors of queries; O = diag(alpha)·O + P · V_blk with P read transposed.
template <typename T, typename E, int VB>
UOE_ATTN_INLINE void fwd_task(const Ctx<T, E>& c, int64_t task, T* ws) {
  using S = Simd<T, VB>;
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t Dh = c.Dh, Dhp = (Dh + W - 1) / W * W;
  const bool direct = Dh % W == 0;  // V rows of type T can feed the GEMM in place
  // Tasks run the last (heaviest under a causal mask) query blocks first.
  const auto [b, h, hk, i0, qn] = query_block(c, task);
  const E* qp = c.q_row(b, h, i0);
  const E* kp = c.k_row(b, hk, 0);
  const E* vp = c.v_row(b, hk, 0);

  T* QT = ws;             // [Dh][kBq]
  T* ST = QT + Dh * kBq;  // [kBk][kBq]  scores, then probabilities, transposed
  T* O = ST + kBk * kBq;  // [kBq][Dhp]  unnormalised output rows
  T* Vb = O + kBq * Dhp;  // [kBk][Dhp]  padded V rows when Dh % W != 0
  T* m = Vb + kBk * Dhp;  // [kBq] running max
  T* l = m + kBq;         // [kBq] running sum
  T* alpha = l + kBq;     // [kBq] rescale of O for the current key block
  T* Kb = alpha + kBq;    // [kBk][Dhp]  K rows widened when E is not T

  pack_transposed(QT, kBq, qp, c.qs.time, qn, Dh);
  for (int i = 0; i < kBq; ++i) m[i] = -std::numeric_limits<T>::infinity(), l[i] = T(0);
  const V sc = c.scale - V{};

  const int64_t nk = c.causal ? ceil_div(i0 + qn, kBk) : c.nkb;  // causal: blocks above the diagonal skipped
  for (int64_t kb = 0; kb < nk; ++kb) {
    const int64_t j0 = kb * kBk;
    const int kn = block_rows(c.len, j0, kBk);
    // ST[kn × kBq] = K[j0:j0+kn, :Dh] · QT[:Dh, :kBq]
    int64_t ldk;
    const T* Ak = rows_as(Kb, Dhp, kp + j0 * c.ks.time, c.ks.time, kn, Dh, true, ldk);
    gemm<T, VB>(kn, kBq, int(Dh), Ak, ldk, 1, QT, kBq, ST, kBq, 0);
    const bool diag = c.causal && j0 + kn - 1 > i0;  // some (query, key) pairs of this block are masked
    for (int cv = 0; cv < kBq / W; ++cv) {  // W query columns at a time
      V idx, mx, ms, a, sum = V{};
      S::iota(idx, cv * W);
      column_max<T, VB>(mx, ms, a, m + cv * W, ST + cv * W, kBq, kn, sc, idx, diag, j0 - i0);
      for (int j = 0; j < kn; ++j) {  // p = exp(s·scale − max), column sums
        V s;
        S::load(s, ST + j * kBq + cv * W);
        exp_scores<T, VB>(s, sc, ms, idx, diag, j0 - i0, j);
        S::store(ST + j * kBq + cv * W, s);
        sum += s;
      }
      update_stats<T, VB>(m + cv * W, l + cv * W, alpha + cv * W, mx, a, sum);
    }
    int64_t ldv;
    const T* Bv = rows_as(Vb, Dhp, vp + j0 * c.vs.time, c.vs.time, kn, Dh, direct, ldv);
    // O[qn × Dhp] = alpha ⊙ O + ST^T[qn × kn] · V[kn × Dhp]
    gemm<T, VB>(qn, int(Dhp), kn, ST, 1, kBq, Bv, ldv, O, Dhp, kb == 0 ? 0 : 2, alpha);
  }
  E* op = c.out + b * c.os.batch + h * c.os.head + i0 * c.os.time;
  T* lp = c.lse_out + (b * c.H + h) * c.len + i0;
  for (int i = 0; i < qn; ++i) {  // out = O / l, lse = m + log l
    store_scaled(op + i * c.os.time, O + i * Dhp, Dh, T(1) / l[i]);
    lp[i] = m[i] + std::log(l[i]);
  }
}

// Backward pass 1 task: one (b, kv head, key block) → dk, dv rows of that block. Loops over the q heads of the
// group and their query blocks in a fixed order; S = Q_blk · K_blk^T (query rows × key columns).
template <typename T, typename E, int VB>
UOE_ATTN_INLINE void bwd_kv_task(const Ctx<T, E>& c, int64_t task, T* ws) {
  using S = Simd<T, VB>;
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t Dh = c.Dh, Dhp = (Dh + W - 1) / W * W;
  const bool direct = Dh % W == 0;
  const auto [b, hk, j0, kn] = key_block(c, task);

  T* KT = ws;               // [Dh][kBk]
  T* VT = KT + Dh * kBk;    // [Dh][kBk]
  T* P = VT + Dh * kBk;     // [kBq][kBk] probabilities
  T* dS = P + kBq * kBk;    // [kBq][kBk] dP, then dS
  T* dK = dS + kBq * kBk;   // [kBk][Dhp]
  T* dV = dK + kBk * Dhp;   // [kBk][Dhp]
  T* Qb = dV + kBk * Dhp;   // [kBq][Dhp] Q rows, padded when Dh % W != 0 or widened when E is not T
  T* dOb = Qb + kBq * Dhp;  // [kBq][Dhp] dO rows, likewise

  pack_transposed(KT, kBk, c.k_row(b, hk, j0), c.ks.time, kn, Dh);
  pack_transposed(VT, kBk, c.v_row(b, hk, j0), c.vs.time, kn, Dh);
  const V sc = c.scale - V{};
  bool first = true;
  const KeyBlockQueries queries = queries_of(c, hk, j0);
  for (int64_t n = 0; n < queries.count(); ++n) {  // the query blocks that see this key block, fixed order
    const auto [h, i0, qn] = queries.at(n);
    const T* lse = c.lse_row(b, h, i0);
    const T* dsum = c.dsum_row(b, h, i0);
    int64_t ldq, lddo;
    const T* Bq = rows_as(Qb, Dhp, c.q_row(b, h, i0), c.qs.time, qn, Dh, direct, ldq);
    const T* Bdo = rows_as(dOb, Dhp, c.dout_row(b, h, i0), c.dos.time, qn, Dh, direct, lddo);
    // P[qn × kBk] = Q · KT ; dS[qn × kBk] = dO · VT (= dP)
    gemm<T, VB>(qn, kBk, int(Dh), Bq, ldq, 1, KT, kBk, P, kBk, 0);
    gemm<T, VB>(qn, kBk, int(Dh), Bdo, lddo, 1, VT, kBk, dS, kBk, 0);
    const bool diag = c.causal && j0 + kn - 1 > i0;
    for (int i = 0; i < qn; ++i) {  // row i: p = exp(s·scale − lse), ds = p ⊙ (dp − D)
      const V li = lse[i] - V{}, di = dsum[i] - V{}, thr = T(i0 + i - j0) - V{};
      for (int cv = 0; cv < kBk / W; ++cv) {
        V s, dp, idx;
        S::load(s, P + i * kBk + cv * W);
        S::load(dp, dS + i * kBk + cv * W);
        s = s * sc - li;
        S::exp(s);
        if (diag) {
          S::iota(idx, cv * W);
          s = idx <= thr ? s : V{};
        }
        S::store(P + i * kBk + cv * W, s);
        S::store(dS + i * kBk + cv * W, s * (dp - di));
      }
    }
    // dV[kn × Dhp] += P^T[kn × qn] · dO[qn × Dhp] ; dK[kn × Dhp] += dS^T · Q
    gemm<T, VB>(kn, int(Dhp), qn, P, 1, kBk, Bdo, lddo, dV, Dhp, first ? 0 : 1);
    gemm<T, VB>(kn, int(Dhp), qn, dS, 1, kBk, Bq, ldq, dK, Dhp, first ? 0 : 1);
    first = false;
  }
  if (first) std::fill(dK, dK + kBk * Dhp, T(0)), std::fill(dV, dV + kBk * Dhp, T(0));  // no query sees it
  E* dkp = c.dk + b * c.dks.batch + hk * c.dks.head + j0 * c.dks.time;
  E* dvp = c.dv + b * c.dvs.batch + hk * c.dvs.head + j0 * c.dvs.time;
  for (int j = 0; j < kn; ++j) {  // dk = scale · dK, dv = dV
    store_scaled(dkp + j * c.dks.time, dK + j * Dhp, Dh, c.scale);
    store_scaled(dvp + j * c.dvs.time, dV + j * Dhp, Dh, T(1));
  }
}

// Backward pass 2 task: one (b, h, query block) → dq rows. S^T = K_blk · Q_blk^T as in the forward.
template <typename T, typename E, int VB>
UOE_ATTN_INLINE void bwd_q_task(const Ctx<T, E>& c, int64_t task, T* ws) {
  using S = Simd<T, VB>;
  using V = typename S::V;
  constexpr int W = S::W;
  const int64_t Dh = c.Dh, Dhp = (Dh + W - 1) / W * W;
  const bool direct = Dh % W == 0;
  const auto [b, h, hk, i0, qn] = query_block(c, task);
  const E* kp = c.k_row(b, hk, 0);
  const E* vp = c.v_row(b, hk, 0);

  T* QT = ws;               // [Dh][kBq]
  T* dOT = QT + Dh * kBq;   // [Dh][kBq]
  T* ST = dOT + Dh * kBq;   // [kBk][kBq] scores / probabilities, transposed
  T* dST = ST + kBk * kBq;  // [kBk][kBq] dP^T, then dS^T
  T* dQ = dST + kBk * kBq;  // [kBq][Dhp]
  T* Kb = dQ + kBq * Dhp;   // [kBk][Dhp] K rows, padded when Dh % W != 0 or widened when E is not T
  T* Vb = Kb + kBk * Dhp;   // [kBk][Dhp] V rows widened when E is not T
  T* Lb = Vb + kBk * Dhp;   // [kBq] lse (0 past qn)
  T* Db = Lb + kBq;         // [kBq] D = rowsum(dout ⊙ out) (0 past qn)

  pack_transposed(QT, kBq, c.q_row(b, h, i0), c.qs.time, qn, Dh);
  pack_transposed(dOT, kBq, c.dout_row(b, h, i0), c.dos.time, qn, Dh);
  for (int i = 0; i < kBq; ++i) {
    Lb[i] = i < qn ? c.lse_row(b, h, i0)[i] : T(0);
    Db[i] = i < qn ? c.dsum_row(b, h, i0)[i] : T(0);
  }
  const V sc = c.scale - V{};
  const int64_t nk = c.causal ? ceil_div(i0 + qn, kBk) : c.nkb;
  for (int64_t kb = 0; kb < nk; ++kb) {
    const int64_t j0 = kb * kBk;
    const int kn = block_rows(c.len, j0, kBk);
    int64_t ldk, ldv;
    const T* Bk = rows_as(Kb, Dhp, kp + j0 * c.ks.time, c.ks.time, kn, Dh, direct, ldk);
    const T* Av = rows_as(Vb, Dhp, vp + j0 * c.vs.time, c.vs.time, kn, Dh, true, ldv);
    // ST[kn × kBq] = K · QT ; dST[kn × kBq] = V · dOT (= dP^T)
    gemm<T, VB>(kn, kBq, int(Dh), Bk, ldk, 1, QT, kBq, ST, kBq, 0);
    gemm<T, VB>(kn, kBq, int(Dh), Av, ldv, 1, dOT, kBq, dST, kBq, 0);
    const bool diag = c.causal && j0 + kn - 1 > i0;
    for (int cv = 0; cv < kBq / W; ++cv) {  // W query columns at a time
      V li, di, idx;
      S::load(li, Lb + cv * W);
      S::load(di, Db + cv * W);
      S::iota(idx, cv * W);
      for (int j = 0; j < kn; ++j) {  // ds^T = exp(s·scale − lse) ⊙ (dp − D)
        V s, dp;
        S::load(s, ST + j * kBq + cv * W);
        S::load(dp, dST + j * kBq + cv * W);
        exp_scores<T, VB>(s, sc, li, idx, diag, j0 - i0, j);
        S::store(dST + j * kBq + cv * W, s * (dp - di));
      }
    }
    // dQ[qn × Dhp] += dST^T[qn × kn] · K[kn × Dhp]
    gemm<T, VB>(qn, int(Dhp), kn, dST, 1, kBq, Bk, ldk, dQ, Dhp, kb == 0 ? 0 : 1);
  }
  E* dqp = c.dq + b * c.dqs.batch + h * c.dqs.head + i0 * c.dqs.time;
  for (int i = 0; i < qn; ++i) store_scaled(dqp + i * c.dqs.time, dQ + i * Dhp, Dh, c.scale);  // dq = scale · dQ
}

// ---------------------------------------------------------------------------------------------------------
// Per-ISA task entry points and run-time selection.
enum class Kind { fwd, bwd_kv, bwd_q };

template <typename T, typename E, int VB>
UOE_ATTN_INLINE void run_task(Kind kind, const Ctx<T, E>& c, int64_t t, T* ws) {
  if (kind == Kind::fwd)
    fwd_task<T, E, VB>(c, t, ws);
  else if (kind == Kind::bwd_kv)
    bwd_kv_task<T, E, VB>(c, t, ws);
  else
    bwd_q_task<T, E, VB>(c, t, ws);
}
#if UOE_ATTN_X86
template <typename T, typename E>
UOE_ATTN_V4 void task_v4(Kind kind, const Ctx<T, E>& c, int64_t t, T* ws) { run_task<T, E, 64>(kind, c, t, ws); }
template <typename T, typename E>
UOE_ATTN_V3 void task_v3(Kind kind, const Ctx<T, E>& c, int64_t t, T* ws) { run_task<T, E, 32>(kind, c, t, ws); }
#endif
template <typename T, typename E>
void task_v1(Kind kind, const Ctx<T, E>& c, int64_t t, T* ws) { run_task<T, E, 16>(kind, c, t, ws); }

// Highest level the CPU supports (4: x86-64-v4, 3: x86-64-v3, 1: baseline) and the testing cap on it.
int cpu_isa_level() {
#if UOE_ATTN_X86
  static const int level = [] {
    __builtin_cpu_init();
    const int cpu = __builtin_cpu_supports("x86-64-v4") ? 4 : __builtin_cpu_supports("x86-64-v3") ? 3 : 1;
    return std::min(cpu, pinned_isa_level());
  }();
  return level;
#else
  return 1;
#endif
}
std::atomic<int> g_isa_cap{0};

int isa_level() {
  const int cap = g_isa_cap.load(std::memory_order_relaxed);
  const int l = cap > 0 ? std::min(cap, cpu_isa_level()) : cpu_isa_level();
  return l >= 4 ? 4 : l == 3 ? 3 : 1;
}

template <typename T, typename E>
auto select_task() {
#if UOE_ATTN_X86
  const int level = isa_level();
  if (level >= 4) return &task_v4<T, E>;
  if (level == 3) return &task_v3<T, E>;
#endif
  return &task_v1<T, E>;
}

template <typename T, typename E>
void run_tasks(Kind kind, const Ctx<T, E>& c, int64_t ntask) {
  const auto fn = select_task<T, E>();
  run_parallel(ntask, sizeof(T) * workspace_elems(c.Dh),
               [&](int64_t t, std::byte* ws) { fn(kind, c, t, reinterpret_cast<T*>(ws)); });
}

// The forward and backward on operands stored as E, computed in T.
template <typename T, typename E>
void forward(const AttnShape& s, const E* q, AttnStrides qs, const E* k, AttnStrides ks, const E* v, AttnStrides vs,
             E* out, AttnStrides os, T* lse) {
  Ctx<T, E> c = make_ctx<T, E>(s);
  if (s.B == 0 || s.T == 0) return;
  if (s.Dh == 0) return lse_of_empty_heads(s, lse);
  c.q = q, c.k = k, c.v = v, c.qs = qs, c.ks = ks, c.vs = vs, c.out = out, c.os = os, c.lse_out = lse;
  run_tasks(Kind::fwd, c, c.B * c.H * c.nqb);
}

template <typename T, typename E>
void backward(const AttnShape& s, const E* q, AttnStrides qs, const E* k, AttnStrides ks, const E* v, AttnStrides vs,
              const E* out, AttnStrides os, const T* lse, const E* dout, AttnStrides dos, E* dq, AttnStrides dqs,
              E* dk, AttnStrides dks, E* dv, AttnStrides dvs) {
  Ctx<T, E> c = make_ctx<T, E>(s);
  if (s.B == 0 || s.T == 0 || s.Dh == 0) return;  // nothing to write
  c.q = q, c.k = k, c.v = v, c.lse_in = lse, c.dout = dout;
  c.qs = qs, c.ks = ks, c.vs = vs, c.os = os, c.dos = dos, c.dqs = dqs, c.dks = dks, c.dvs = dvs;
  c.dq = dq, c.dk = dk, c.dv = dv;
  const std::vector<T> dsum = dout_out_row_sums(c, out, os, dout, dos);
  c.dsum = dsum.data();
  run_tasks(Kind::bwd_kv, c, c.B * c.Hkv * c.nkb);
  run_tasks(Kind::bwd_q, c, c.B * c.H * c.nqb);
}

}  // namespace

void attention_forward_f32_kernels(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k,
                                   AttnStrides ks, const BFloat16* v, AttnStrides vs, BFloat16* out, AttnStrides os,
                                   float* lse) {
  forward<float, BFloat16>(s, q, qs, k, ks, v, vs, out, os, lse);
}

void attention_backward_f32_kernels(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k,
                                    AttnStrides ks, const BFloat16* v, AttnStrides vs, const BFloat16* out,
                                    AttnStrides os, const float* lse, const BFloat16* dout, AttnStrides dos,
                                    BFloat16* dq, AttnStrides dqs, BFloat16* dk, AttnStrides dks, BFloat16* dv,
                                    AttnStrides dvs) {
  backward<float, BFloat16>(s, q, qs, k, ks, v, vs, out, os, lse, dout, dos, dq, dqs, dk, dks, dv, dvs);
}

int attention_set_isa_level(int level) {
  g_isa_cap.store(level < 0 ? 0 : level, std::memory_order_relaxed);
  return isa_level();
}

template <typename T>
void attention_forward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                       AttnStrides vs, T* out, AttnStrides os, T* lse) {
  forward<T, T>(s, q, qs, k, ks, v, vs, out, os, lse);
}

template <typename T>
void attention_backward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                        AttnStrides vs, const T* out, AttnStrides os, const T* lse, const T* dout, AttnStrides dos,
                        T* dq, AttnStrides dqs, T* dk, AttnStrides dks, T* dv, AttnStrides dvs) {
  backward<T, T>(s, q, qs, k, ks, v, vs, out, os, lse, dout, dos, dq, dqs, dk, dks, dv, dvs);
}

#define UOE_ATTN_INSTANTIATE(T)                                                                              \
  template void attention_forward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*,      \
                                     AttnStrides, T*, AttnStrides, T*);                                             \
  template void attention_backward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*,     \
                                      AttnStrides, const T*, AttnStrides, const T*, const T*, AttnStrides, T*,      \
                                      AttnStrides, T*, AttnStrides, T*, AttnStrides);
UOE_ATTN_INSTANTIATE(float)
UOE_ATTN_INSTANTIATE(double)
#undef UOE_ATTN_INSTANTIATE

}  // namespace uoe::cpu
