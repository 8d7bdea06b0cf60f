// The tensor-core bf16 attention backward kernels (launched by cuda/attention_mma_backward.cu; run on the CPU by
// uoe_cuda_emu_tests): FlashAttention-2's dk/dv pass and dq pass with mma.sync m16n8k16.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/attention_mma_tiles.cuh"

namespace uoe::cuda::detail {
namespace {

template <int DH>
constexpr size_t kv_smem() {
  return size_t(2 * kBK + 4 * kQC) * (DH + 8) * 2 + 4 * kQC * sizeof(float);
}
template <int DH>
constexpr size_t q_smem() {
  return size_t(2 * kBQ + 4 * kBK) * (DH + 8) * 2;
}

// ---- backward, dk/dv: one block per (b, kv head, 64-key tile); each warp 16 keys. Loops over the group's q heads
// and 32-query chunks (from the diagonal under causal), Q/dO chunks double-buffered; dK, dV in registers. ------------
template <int DH>
__global__ void __launch_bounds__(kThreads) attn_bwd_kv_mma_kernel(const MmaArgs a) {
  constexpr int LDS = DH + 8;
  uint16_t* Ks = reinterpret_cast<uint16_t*>(dynamic_smem());  // [kBK][LDS]
  uint16_t* Vs = Ks + kBK * LDS;                         // [kBK][LDS]
  uint16_t* Qs = Vs + kBK * LDS;                         // [2][kQC][LDS]
  uint16_t* dOs = Qs + 2 * kQC * LDS;                    // [2][kQC][LDS]
  float* Ls = reinterpret_cast<float*>(dOs + 2 * kQC * LDS);  // [2][kQC] lse
  float* Ds = Ls + 2 * kQC;                                   // [2][kQC] rowsum(dO ⊙ O)
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3, w0 = warp * 16;
  const int64_t BHk = a.B * a.Hkv;
  const Task task = block_task(BHk, a.nkb, a.tiles_inner);  // heavy causal tiles (the first) first
  const int64_t bh = task.head, kb = task.rank, b = bh / a.Hkv, hk = bh % a.Hkv, j0 = kb * kBK;
  const int64_t nqc = (a.T + kQC - 1) / kQC, qc0 = a.causal ? j0 / kQC : 0, per_head = nqc - qc0;
  const int64_t total = a.G * per_head;

  // Issues the loads of chunk `it` (q head hk*G + it / per_head, chunk qc0 + it % per_head) into buffer buf, all
  // asynchronous (a plain load of lse or D would stall its warp, and the block at the next barrier, every chunk).
  auto load_chunk = [&](int64_t it, int buf) {
    const int64_t h = hk * a.G + it / per_head, i0 = (qc0 + it % per_head) * kQC;
    load_tile_async<DH>(Qs + buf * kQC * LDS, LDS, a.q + b * a.qs.batch + h * a.qs.head, a.qs.time, i0, kQC, a.T);
    load_tile_async<DH>(dOs + buf * kQC * LDS, LDS, a.dout + b * a.dos.batch + h * a.dos.head, a.dos.time, i0, kQC,
                        a.T);
    for (int i = threadIdx.x; i < kQC; i += kThreads) {  // rows >= T: zeros
      const bool ok = i0 + i < a.T;
      const int64_t r = (b * a.H + h) * a.T + (ok ? i0 + i : 0);
      cp_async4(smem_u32(Ls + buf * kQC + i), a.lse_in + r, ok);
      cp_async4(smem_u32(Ds + buf * kQC + i), a.dsum + r, ok);
    }
  };
  load_tile_async<DH>(Ks, LDS, a.k + b * a.ks.batch + hk * a.ks.head, a.ks.time, j0, kBK, a.T);
  load_tile_async<DH>(Vs, LDS, a.v + b * a.vs.batch + hk * a.vs.head, a.vs.time, j0, kBK, a.T);
  if (total > 0) load_chunk(0, 0);
  cp_async_commit();

  float dk[DH / 8][4], dv[DH / 8][4];
#pragma unroll
  for (int dt = 0; dt < DH / 8; ++dt)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[dt][e] = dv[dt][e] = 0.0f;

  for (int64_t it = 0; it < total; ++it) {
    const int cur = int(it & 1);
    if (it + 1 < total) {
      load_chunk(it + 1, cur ^ 1);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint16_t* Qc = Qs + cur * kQC * LDS;
    const uint16_t* dOc = dOs + cur * kQC * LDS;
    const float* Lc = Ls + cur * kQC;
    const float* Dc = Ds + cur * kQC;
    const int64_t i0 = (qc0 + it % per_head) * kQC;
    // S^T = K Q^T and dP^T = V dO^T: 16 keys x 32 queries per warp
    float st[4][4], dpt[4][4];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) st[nt][e] = dpt[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DH / 16; ++kk) {
      uint32_t ka[4], va[4];
      ldsm_x4(ka, smem_u32(Ks + a_off(lane, w0, kk * 16, LDS)));
      ldsm_x4(va, smem_u32(Vs + a_off(lane, w0, kk * 16, LDS)));
#pragma unroll
      for (int np = 0; np < 2; ++np) {
        uint32_t bq[4], bo[4];
        ldsm_x4(bq, smem_u32(Qc + bt_off(lane, np * 16, kk * 16, LDS)));
        ldsm_x4(bo, smem_u32(dOc + bt_off(lane, np * 16, kk * 16, LDS)));
        mma(st[2 * np], ka, bq[0], bq[1]);
        mma(st[2 * np + 1], ka, bq[2], bq[3]);
        mma(dpt[2 * np], va, bo[0], bo[1]);
        mma(dpt[2 * np + 1], va, bo[2], bo[3]);
      }
    }
    // P^T = 2^(scale log2e s - lse log2e), dS^T = P^T (dP^T - D); 0 where masked
    const int Ti = int(a.T), ib = int(i0), jb = int(j0) + w0 + g;  // T < 2^31 (checked on the host)
#pragma unroll
    for (int nt = 0; nt < 4; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int il = nt * 8 + 2 * tq + (e & 1), j = jb + 8 * (e >> 1), i = ib + il;
        const bool ok = i < Ti && j < Ti && (!a.causal || j <= i);
        const float p = ok ? exp2f(st[nt][e] * a.scale_log2 - __fmul_rn(Lc[il], kLog2e)) : 0.0f;
        st[nt][e] = p;
        dpt[nt][e] = p * (dpt[nt][e] - Dc[il]);
      }
    }
    // dV += P^T dO, then dK += dS^T Q: 2 k-steps of 16 queries each (separate loops: shorter live ranges)
#pragma unroll
    for (int kq = 0; kq < 2; ++kq) {
      uint32_t pa[4];
      acc_to_a(pa, st[2 * kq], st[2 * kq + 1]);
#pragma unroll
      for (int dp = 0; dp < DH / 16; ++dp) {
        uint32_t bo[4];
        ldsm_x4_trans(bo, smem_u32(dOc + b_off(lane, kq * 16, dp * 16, LDS)));
        mma(dv[2 * dp], pa, bo[0], bo[1]);
        mma(dv[2 * dp + 1], pa, bo[2], bo[3]);
      }
    }
#pragma unroll
    for (int kq = 0; kq < 2; ++kq) {
      uint32_t sa[4];
      acc_to_a(sa, dpt[2 * kq], dpt[2 * kq + 1]);
#pragma unroll
      for (int dp = 0; dp < DH / 16; ++dp) {
        uint32_t bq[4];
        ldsm_x4_trans(bq, smem_u32(Qc + b_off(lane, kq * 16, dp * 16, LDS)));
        mma(dk[2 * dp], sa, bq[0], bq[1]);
        mma(dk[2 * dp + 1], sa, bq[2], bq[3]);
      }
    }
    __syncthreads();
  }
  // dk = scale dK, dv = dV (zero where no query sees the key)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t j = j0 + w0 + g + 8 * r;
    if (j >= a.T) continue;
    uint16_t* krow = a.dk + b * a.dks.batch + hk * a.dks.head + j * a.dks.time;
    uint16_t* vrow = a.dv + b * a.dvs.batch + hk * a.dvs.head + j * a.dvs.time;
#pragma unroll
    for (int dt = 0; dt < DH / 8; ++dt) {
      *reinterpret_cast<uint32_t*>(krow + dt * 8 + 2 * tq) =
          pack_bf16(dk[dt][2 * r] * a.scale, dk[dt][2 * r + 1] * a.scale);
      *reinterpret_cast<uint32_t*>(vrow + dt * 8 + 2 * tq) = pack_bf16(dv[dt][2 * r], dv[dt][2 * r + 1]);
    }
  }
}

// ---- backward, dq: one block per (b, h, 64-query tile); each warp 16 queries; K/V tiles double-buffered --------
template <int DH>
__global__ void __launch_bounds__(kThreads) attn_bwd_q_mma_kernel(const MmaArgs a) {
  constexpr int LDS = DH + 8;
  uint16_t* Qs = reinterpret_cast<uint16_t*>(dynamic_smem());  // [kBQ][LDS]
  uint16_t* dOs = Qs + kBQ * LDS;                        // [kBQ][LDS]
  uint16_t* Ks = dOs + kBQ * LDS;                        // [2][kBK][LDS]
  uint16_t* Vs = Ks + 2 * kBK * LDS;                     // [2][kBK][LDS]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3, w0 = warp * 16;
  const int64_t BH = a.B * a.H;
  const Task task = block_task(BH, a.nqb, a.tiles_inner);  // heavy causal tiles (the last) first
  const int64_t qb = a.nqb - 1 - task.rank, bh = task.head, b = bh / a.H, h = bh % a.H, hk = h / a.G, i0 = qb * kBQ;
  const uint16_t* kp = a.k + b * a.ks.batch + hk * a.ks.head;
  const uint16_t* vp = a.v + b * a.vs.batch + hk * a.vs.head;
  const int64_t nk = a.causal ? min64(a.nkb, qb + 1) : a.nkb;

  load_tile_async<DH>(Qs, LDS, a.q + b * a.qs.batch + h * a.qs.head, a.qs.time, i0, kBQ, a.T);
  load_tile_async<DH>(dOs, LDS, a.dout + b * a.dos.batch + h * a.dos.head, a.dos.time, i0, kBQ, a.T);
  load_tile_async<DH>(Ks, LDS, kp, a.ks.time, 0, kBK, a.T);
  load_tile_async<DH>(Vs, LDS, vp, a.vs.time, 0, kBK, a.T);
  cp_async_commit();
  float L[2], Dr[2];  // rows g, g + 8: lse * log2(e), rowsum(dO ⊙ O)
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int64_t i = i0 + w0 + g + 8 * r;
    L[r] = i < a.T ? a.lse_in[bh * a.T + i] * kLog2e : 0.0f;
    Dr[r] = i < a.T ? a.dsum[bh * a.T + i] : 0.0f;
  }
  float dq[DH / 8][4];
#pragma unroll
  for (int dt = 0; dt < DH / 8; ++dt) dq[dt][0] = dq[dt][1] = dq[dt][2] = dq[dt][3] = 0.0f;

  for (int64_t kb = 0; kb < nk; ++kb) {
    const int cur = int(kb & 1);
    if (kb + 1 < nk) {
      load_tile_async<DH>(Ks + (cur ^ 1) * kBK * LDS, LDS, kp, a.ks.time, (kb + 1) * kBK, kBK, a.T);
      load_tile_async<DH>(Vs + (cur ^ 1) * kBK * LDS, LDS, vp, a.vs.time, (kb + 1) * kBK, kBK, a.T);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();
    const uint16_t* Kc = Ks + cur * kBK * LDS;
    const uint16_t* Vc = Vs + cur * kBK * LDS;
    // S = Q K^T, dP = dO V^T: 16 x 64 per warp
    float s[8][4], dp[8][4];
#pragma unroll
    for (int nt = 0; nt < 8; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DH / 16; ++kk) {
      uint32_t qa[4], oa[4];
      ldsm_x4(qa, smem_u32(Qs + a_off(lane, w0, kk * 16, LDS)));
      ldsm_x4(oa, smem_u32(dOs + a_off(lane, w0, kk * 16, LDS)));
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bk[4], bv[4];
        ldsm_x4(bk, smem_u32(Kc + bt_off(lane, np * 16, kk * 16, LDS)));
        ldsm_x4(bv, smem_u32(Vc + bt_off(lane, np * 16, kk * 16, LDS)));
        mma(s[2 * np], qa, bk[0], bk[1]);
        mma(s[2 * np + 1], qa, bk[2], bk[3]);
        mma(dp[2 * np], oa, bv[0], bv[1]);
        mma(dp[2 * np + 1], oa, bv[2], bv[3]);
      }
    }
    const int Ti = int(a.T), jb = int(kb * kBK) + 2 * tq, ib = int(i0) + w0 + g;  // T < 2^31 (checked on the host)
#pragma unroll
    for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int r = e >> 1, j = jb + nt * 8 + (e & 1), i = ib + 8 * r;
        const bool ok = i < Ti && j < Ti && (!a.causal || j <= i);
        const float p = ok ? exp2f(s[nt][e] * a.scale_log2 - L[r]) : 0.0f;
        dp[nt][e] = p * (dp[nt][e] - Dr[r]);  // dS
      }
    }
    // dQ += dS K: 4 k-steps of 16 keys
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t sa[4];
      acc_to_a(sa, dp[2 * kk], dp[2 * kk + 1]);
#pragma unroll
      for (int dd = 0; dd < DH / 16; ++dd) {
        uint32_t bk[4];
        ldsm_x4_trans(bk, smem_u32(Kc + b_off(lane, kk * 16, dd * 16, LDS)));
        mma(dq[2 * dd], sa, bk[0], bk[1]);
        mma(dq[2 * dd + 1], sa, bk[2], bk[3]);
      }
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {  // dq = scale dQ
    const int64_t i = i0 + w0 + g + 8 * r;
    if (i >= a.T) continue;
    uint16_t* qrow = a.dq + b * a.dqs.batch + h * a.dqs.head + i * a.dqs.time;
#pragma unroll
    for (int dt = 0; dt < DH / 8; ++dt)
      *reinterpret_cast<uint32_t*>(qrow + dt * 8 + 2 * tq) =
          pack_bf16(dq[dt][2 * r] * a.scale, dq[dt][2 * r + 1] * a.scale);
  }
}

}  // namespace
}  // namespace uoe::cuda::detail
