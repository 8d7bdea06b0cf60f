// Task structure shared by the CPU fused attention kernels (float/double: ops/cpu/attention_kernels.cpp, bfloat16:
// ops/cpu/attention_bf16.cpp): tile sizes, the problem context, the OpenMP task runner with per-thread workspace,
// and the backward's row sums D = rowsum(dout ⊙ out). Private to those files.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <vector>

#include "core/error.h"
#include "ops/cpu/simd.h"
#include "ops/kernels/attention.h"

namespace uoe::cpu {

// The float kernels (attention_kernels.cpp) on bfloat16 tensors, for CPUs without AVX512-BF16: each tile widened
// to float32 as it is packed, each result rounded once as it is stored (the bits of the float kernels on the
// widened tensors, rounded), with no float32 copy of a tensor.
void attention_forward_f32_kernels(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k,
                                   AttnStrides ks, const BFloat16* v, AttnStrides vs, BFloat16* out, AttnStrides os,
                                   float* lse);
void attention_backward_f32_kernels(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k,
                                    AttnStrides ks, const BFloat16* v, AttnStrides vs, const BFloat16* out,
                                    AttnStrides os, const float* lse, const BFloat16* dout, AttnStrides dos,
                                    BFloat16* dq, AttnStrides dqs, BFloat16* dk, AttnStrides dks, BFloat16* dv,
                                    AttnStrides dvs);

namespace {

// Tile sizes: a thread holds score tiles of kBq query rows × kBk key rows (never the full T×T matrix).
constexpr int kBq = 64;
constexpr int kBk = 64;

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Problem description shared by the tasks of one call: E is the element type of q, k, v, out, dout and the
// gradients, T the type of the softmax statistics (lse, D) and of the arithmetic.
template <typename T, typename E = T>
struct Ctx {
  int64_t B, H, Hkv, len, Dh, G, nqb, nkb;  // len = sequence length T; G = H / Hkv q heads per kv head
  T scale;
  bool causal;
  const E *q, *k, *v, *dout;
  const T *lse_in, *dsum;
  AttnStrides qs, ks, vs, os, dos, dqs, dks, dvs;
  E *out, *dq, *dk, *dv;
  T* lse_out;

  // Row t of head h of batch b of an operand, and of the [B,H,T] statistics.
  const E* q_row(int64_t b, int64_t h, int64_t t) const { return q + b * qs.batch + h * qs.head + t * qs.time; }
  const E* k_row(int64_t b, int64_t hk, int64_t t) const { return k + b * ks.batch + hk * ks.head + t * ks.time; }
  const E* v_row(int64_t b, int64_t hk, int64_t t) const { return v + b * vs.batch + hk * vs.head + t * vs.time; }
  const E* dout_row(int64_t b, int64_t h, int64_t t) const {
    return dout + b * dos.batch + h * dos.head + t * dos.time;
  }
  const T* lse_row(int64_t b, int64_t h, int64_t t) const { return lse_in + (b * H + h) * len + t; }
  const T* dsum_row(int64_t b, int64_t h, int64_t t) const { return dsum + (b * H + h) * len + t; }
};

template <typename T, typename E = T>
Ctx<T, E> make_ctx(const AttnShape& s) {
  UOE_CHECK(s.B >= 0 && s.T >= 0 && s.Dh >= 0 && s.H > 0 && s.Hkv > 0, "attention: bad shape B=", s.B, " H=", s.H,
            " Hkv=", s.Hkv, " T=", s.T, " Dh=", s.Dh);
  UOE_CHECK(s.H % s.Hkv == 0, "attention: H=", s.H, " is not a multiple of Hkv=", s.Hkv);
  UOE_CHECK(s.Dh <= (int64_t(1) << 20), "attention: head dim ", s.Dh, " too large");
  Ctx<T, E> c{};
  c.B = s.B, c.H = s.H, c.Hkv = s.Hkv, c.len = s.T, c.Dh = s.Dh, c.G = s.H / s.Hkv;
  c.nqb = ceil_div(s.T, kBq), c.nkb = ceil_div(s.T, kBk);
  c.scale = T(s.scale), c.causal = s.causal;
  return c;
}

// The query block of a forward or dq task: head h (kv head hk) of batch b, query rows i0 .. i0+qn; tasks run the
// last (heaviest under a causal mask) query blocks first.
struct QueryBlock {
  int64_t b, h, hk, i0;
  int qn;
};
template <typename T, typename E>
QueryBlock query_block(const Ctx<T, E>& c, int64_t task) {
  const int64_t bh = task % (c.B * c.H), i0 = (c.nqb - 1 - task / (c.B * c.H)) * kBq, h = bh % c.H;
  return {bh / c.H, h, h / c.G, i0, int(std::min<int64_t>(kBq, c.len - i0))};
}

// The key block of a dk/dv task: kv head hk of batch b, key rows j0 .. j0+kn; the first (heaviest under a causal
// mask) key blocks first.
struct KeyBlock {
  int64_t b, hk, j0;
  int kn;
};
template <typename T, typename E>
KeyBlock key_block(const Ctx<T, E>& c, int64_t task) {
  const int64_t bh = task % (c.B * c.Hkv), j0 = task / (c.B * c.Hkv) * kBk;
  return {bh / c.Hkv, bh % c.Hkv, j0, int(std::min<int64_t>(kBk, c.len - j0))};
}

// The query blocks that see key block j0 of kv head hk (causal: those on or below the diagonal), over the q heads
// of its group, in the fixed order of the dk/dv sums: count() of them, at(n) the n-th (q head h, query rows i0 ..
// i0+qn).
struct KeyBlockQueries {
  struct Block {
    int64_t h, i0;
    int qn;
  };
  int64_t hk, G, len, qb0, per_head;
  int64_t count() const { return G * per_head; }
  Block at(int64_t n) const {
    const int64_t i0 = (qb0 + n % per_head) * kBq;
    return {hk * G + n / per_head, i0, int(std::min<int64_t>(kBq, len - i0))};
  }
};
template <typename T, typename E>
KeyBlockQueries queries_of(const Ctx<T, E>& c, int64_t hk, int64_t j0) {
  const int64_t qb0 = c.causal ? j0 / kBq : 0;
  return {hk, c.G, c.len, qb0, c.nqb - qb0};
}

// Rows of the block of `tile` rows that starts at row r0 of len.
inline int block_rows(int64_t len, int64_t r0, int tile) { return int(std::min<int64_t>(tile, len - r0)); }

// The forward's lse where the head dim is 0: all scores are 0, lse = log(number of visible keys).
template <typename T>
void lse_of_empty_heads(const AttnShape& s, T* lse) {
  for (int64_t r = 0; r < s.B * s.H * s.T; ++r) lse[r] = std::log(T(s.causal ? r % s.T + 1 : s.T));
}

// Runs task(t, workspace) for t = 0..ntask-1 over the OpenMP team, each thread with its own 64-byte aligned
// workspace of ws_bytes. Each task writes disjoint outputs and its arithmetic does not depend on the thread that
// runs it, so the result is independent of the thread count and the schedule.
template <typename Task>
void run_parallel(int64_t ntask, size_t ws_bytes, const Task& task) {
  const int nthreads = ntask > 1 ? omp_get_max_threads() : 1;
  const size_t per_thread = (ws_bytes + 63) / 64 * 64;
  struct Free {
    void operator()(std::byte* p) const { ::operator delete(p, std::align_val_t{64}); }
  };
  // Allocated here so that a failed allocation throws to the caller.
  const std::unique_ptr<std::byte, Free> ws(
      static_cast<std::byte*>(::operator new(per_thread * size_t(nthreads), std::align_val_t{64})));
#pragma omp parallel num_threads(nthreads) if (nthreads > 1)
  {
    std::byte* mine = ws.get() + per_thread * size_t(omp_get_thread_num());
#pragma omp for schedule(dynamic, 1)
    for (int64_t t = 0; t < ntask; ++t) task(t, mine);
  }
}

// D[b,h,t] = rowsum(dout ⊙ out) in T, a contiguous [B,H,T] buffer; one thread per row, fixed summation order (the
// same for every E).
template <typename T, typename E>
std::vector<T> dout_out_row_sums(const Ctx<T, E>& c, const E* out, AttnStrides os, const E* dout, AttnStrides dos) {
  std::vector<T> dsum(size_t(c.B * c.H * c.len));
  const int64_t rows = c.B * c.H * c.len;
#pragma omp parallel for schedule(static) if (rows > 256)
  for (int64_t r = 0; r < rows; ++r) {  // r = (b·H + h)·T + t
    const int64_t t = r % c.len, bh = r / c.len, b = bh / c.H, h = bh % c.H;
    const E* o = out + b * os.batch + h * os.head + t * os.time;
    const E* g = dout + b * dos.batch + h * dos.head + t * dos.time;
    dsum[size_t(r)] = fixed_order_sum<T>(c.Dh, [&](int64_t d) UOE_FIXED_SUM_TERM { return T(o[d]) * T(g[d]); });
  }
  return dsum;
}

}  // namespace
}  // namespace uoe::cpu
