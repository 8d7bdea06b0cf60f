// The tensor-core bf16 attention forward kernel (launched by cuda/attention_mma_forward.cu; run on the CPU by
// uoe_cuda_emu_tests): FlashAttention-2 with mma.sync m16n8k16, 64 or 128 queries per block.
#pragma once
#include <cstddef>
#include <cstdint>

#include "cuda/attention_mma_tiles.cuh"

namespace uoe::cuda::detail {
namespace {

template <int DH, int MT>
constexpr size_t fwd_smem() {
  return size_t(kBQ * MT + 4 * kBK) * (DH + 8) * 2;
}

// ---- forward: one block per (b, h, tile of 64·MT queries); K/V tiles of 64 keys double-buffered ---------------
// Warp w owns rows 64·mt + 16·w of each m-tile mt < MT. With MT = 2 (FlashAttention-2's 128-query tiles) every K
// and V fragment read from shared memory feeds two MMAs instead of one, halving the shared-memory traffic per FLOP;
// Q fragments then come from shared memory at each k-step (MT = 1 keeps them all in registers). Under causal
// masking an m-tile whose rows all precede a key tile skips it.
template <int DH, int MT>
__global__ void __launch_bounds__(kThreads) attn_fwd_mma_kernel(const MmaArgs a) {
  constexpr int LDS = DH + 8, BQ = kBQ * MT;  // padded row: ldmatrix rows land on distinct banks
  uint16_t* Qs = reinterpret_cast<uint16_t*>(dynamic_smem());  // [BQ][LDS]
  uint16_t* Ks = Qs + BQ * LDS;                          // [2][kBK][LDS]
  uint16_t* Vs = Ks + 2 * kBK * LDS;                     // [2][kBK][LDS]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, tq = lane & 3, w0 = warp * 16;
  const int64_t nqb = (a.T + BQ - 1) / BQ, BH = a.B * a.H;
  const Task task = block_task(BH, nqb, a.tiles_inner);  // heavy causal tiles (the last) first
  const int64_t qb = nqb - 1 - task.rank, bh = task.head, b = bh / a.H, h = bh % a.H, hk = h / a.G, i0 = qb * BQ;
  const uint16_t* qp = a.q + b * a.qs.batch + h * a.qs.head;
  const uint16_t* kp = a.k + b * a.ks.batch + hk * a.ks.head;
  const uint16_t* vp = a.v + b * a.vs.batch + hk * a.vs.head;
  // key tiles up to the one holding the tile's last query under causal masking
  const int64_t nk = a.causal ? min64(a.nkb, (i0 + BQ - 1) / kBK + 1) : a.nkb;

  load_tile_async<DH>(Qs, LDS, qp, a.qs.time, i0, BQ, a.T);
  load_tile_async<DH>(Ks, LDS, kp, a.ks.time, 0, kBK, a.T);
  load_tile_async<DH>(Vs, LDS, vp, a.vs.time, 0, kBK, a.T);
  cp_async_commit();

  uint32_t qf[MT == 1 ? DH / 16 : 1][4];  // MT = 1: every Q fragment of the warp's rows, loaded once
  float o[MT][DH / 8][4];
#pragma unroll
  for (int mt = 0; mt < MT; ++mt)
#pragma unroll
    for (int dt = 0; dt < DH / 8; ++dt) o[mt][dt][0] = o[mt][dt][1] = o[mt][dt][2] = o[mt][dt][3] = 0.0f;
  float m[MT][2], l[MT][2];  // rows g and g + 8 of each m-tile (log2 domain); l per thread
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) m[mt][0] = m[mt][1] = -INFINITY, l[mt][0] = l[mt][1] = 0.0f;

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
    if constexpr (MT == 1) {
      if (kb == 0) {
#pragma unroll
        for (int kk = 0; kk < DH / 16; ++kk) ldsm_x4(qf[kk], smem_u32(Qs + a_off(lane, w0, kk * 16, LDS)));
      }
    }
    const uint16_t* Kc = Ks + cur * kBK * LDS;
    const uint16_t* Vc = Vs + cur * kBK * LDS;
    const int64_t j0 = kb * kBK;
    bool live[MT];  // (warp-uniform) some row of the warp's m-tile sees some key of this tile
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) live[mt] = !(a.causal && j0 > i0 + mt * kBQ + w0 + 15);
    // S = Q K^T: 16 x 64 per warp and m-tile
    float s[MT][8][4];
#pragma unroll
    for (int mt = 0; mt < MT; ++mt)
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) s[mt][nt][0] = s[mt][nt][1] = s[mt][nt][2] = s[mt][nt][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < DH / 16; ++kk) {
      uint32_t qa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) {
        if constexpr (MT == 1) {
          qa[mt][0] = qf[kk][0], qa[mt][1] = qf[kk][1], qa[mt][2] = qf[kk][2], qa[mt][3] = qf[kk][3];
        } else {
          ldsm_x4(qa[mt], smem_u32(Qs + a_off(lane, mt * kBQ + w0, kk * 16, LDS)));
        }
      }
#pragma unroll
      for (int np = 0; np < 4; ++np) {
        uint32_t bf[4];
        ldsm_x4(bf, smem_u32(Kc + bt_off(lane, np * 16, kk * 16, LDS)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (!live[mt]) continue;
          mma(s[mt][2 * np], qa[mt], bf[0], bf[1]);
          mma(s[mt][2 * np + 1], qa[mt], bf[2], bf[3]);
        }
      }
    }
#pragma unroll
    for (int mt = 0; mt < MT; ++mt) {
      if (!live[mt]) continue;
      const int64_t r0 = i0 + mt * kBQ + w0;  // the m-tile's first row for this warp
      // scale into the log2 domain; mask keys past T and, under causal, keys after the query
      const bool need_mask = j0 + kBK > a.T || (a.causal && j0 + kBK - 1 > r0);
#pragma unroll
      for (int nt = 0; nt < 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          float x = s[mt][nt][e] * a.scale_log2;
          if (need_mask) {  // T < 2^31 (checked on the host)
            const int j = int(j0) + nt * 8 + 2 * tq + (e & 1), i = int(r0) + g + 8 * (e >> 1);
            if (j >= int(a.T) || (a.causal && j > i)) x = -INFINITY;
          }
          s[mt][nt][e] = x;
        }
      }
      // online softmax per row: m' = max(m, max s), p = 2^(s - m'), l' = 2^(m - m') l + sum p
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        float mx = m[mt][r];
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) mx = fmaxf(mx, fmaxf(s[mt][nt][2 * r], s[mt][nt][2 * r + 1]));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
        const float ms = mx == -INFINITY ? 0.0f : mx;
        const float alpha = exp2f(m[mt][r] - ms);
        m[mt][r] = mx;
        float sum = 0.0f;
#pragma unroll
        for (int nt = 0; nt < 8; ++nt) {
          s[mt][nt][2 * r] = exp2f(s[mt][nt][2 * r] - ms);
          s[mt][nt][2 * r + 1] = exp2f(s[mt][nt][2 * r + 1] - ms);
          sum += s[mt][nt][2 * r] + s[mt][nt][2 * r + 1];
        }
        l[mt][r] = l[mt][r] * alpha + sum;
#pragma unroll
        for (int dt = 0; dt < DH / 8; ++dt) o[mt][dt][2 * r] *= alpha, o[mt][dt][2 * r + 1] *= alpha;
      }
    }
    // O += P V (P rounded to bf16 as the A operand)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      uint32_t pa[MT][4];
#pragma unroll
      for (int mt = 0; mt < MT; ++mt) acc_to_a(pa[mt], s[mt][2 * kk], s[mt][2 * kk + 1]);
#pragma unroll
      for (int dp = 0; dp < DH / 16; ++dp) {
        uint32_t bf[4];
        ldsm_x4_trans(bf, smem_u32(Vc + b_off(lane, kk * 16, dp * 16, LDS)));
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          if (!live[mt]) continue;
          mma(o[mt][2 * dp], pa[mt], bf[0], bf[1]);
          mma(o[mt][2 * dp + 1], pa[mt], bf[2], bf[3]);
        }
      }
    }
    __syncthreads();  // this buffer is refilled two tiles on
  }
  // out = O / l, lse = ln(2^m l) = m ln 2 + ln l
#pragma unroll
  for (int mt = 0; mt < MT; ++mt) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 1);
      l[mt][r] += __shfl_xor_sync(0xffffffffu, l[mt][r], 2);
      const int64_t i = i0 + mt * kBQ + w0 + g + 8 * r;
      if (i >= a.T) continue;
      const float inv = 1.0f / l[mt][r];
      uint16_t* orow = a.out + b * a.os.batch + h * a.os.head + i * a.os.time;
#pragma unroll
      for (int dt = 0; dt < DH / 8; ++dt)
        *reinterpret_cast<uint32_t*>(orow + dt * 8 + 2 * tq) =
            pack_bf16(o[mt][dt][2 * r] * inv, o[mt][dt][2 * r + 1] * inv);
      if (tq == 0) a.lse_out[bh * a.T + i] = m[mt][r] * kLn2 + logf(l[mt][r]);
    }
  }
}

}  // namespace
}  // namespace uoe::cuda::detail
