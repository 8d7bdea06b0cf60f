// The tensor-core bf16 attention kernels (cuda/attention_mma_forward.cuh, attention_mma_backward.cuh) run unchanged on
// the CPU through the stand-in runtime and PTX of tests/cuda_emu/include, against the CPU kernel tests' float64
// attention (tests/ops/cpu/attention_reference.h) on the same bf16 inputs. What this checks without a GPU: the fragment
// layouts and ldmatrix addressing, the masking of partial and causal tiles, grouped-query heads, both task orders and
// both forward tile heights, the cp.async groups (a tile read before its wait sees stale bytes), the shared-memory
// layout (every address checked against the launch's size) and that every output element is written and nothing past
// it. What it cannot check: timing, races between warps that the emulation happens to order, and the hardware's own
// rounding of the MMA sums. The CPU-vs-CUDA parity tests (tests/cuda/) judge the kernels on a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <vector>

#include "cuda/attention_mma_backward.cuh"
#include "cuda/attention_mma_forward.cuh"
#include "tests/cuda_emu/attention_case.h"

namespace uoe::cuda::detail {
namespace {

using B16 = __nv_bfloat16;
using cuda_emu::Guarded, cuda_emu::rel_err;

const uint16_t* bits(const std::vector<B16>& x) { return reinterpret_cast<const uint16_t*>(x.data()); }
uint16_t* bits(Guarded<B16>& x) { return reinterpret_cast<uint16_t*>(x.p()); }

// Runs `kernel` on `blocks` blocks of kThreads with `smem` bytes of dynamic shared memory; every thread must end with
// no cp.async copy outstanding.
template <class Kernel>
void run(Kernel kernel, const MmaArgs& a, int64_t blocks, size_t smem, const std::string& what) {
  std::atomic<int> pending{0};
  cuda_emu::launch(
      unsigned(blocks), kThreads,
      [&] {
        kernel(a);
        pending += int(cp_async_pending());
      },
      smem);
  EXPECT_EQ(pending.load(), 0) << what << ": cp.async copies never waited for";
}

// q, out, dout in [B, T, H, Dh] storage, k, v too (cpu::Layout::BTHD), with DH-wide heads.
template <int DH>
void check(int64_t B, int64_t H, int64_t Hkv, int64_t T, bool causal) {
  const cpu::Problem p = cuda_emu::attention_problem(B, H, Hkv, T, DH, causal, cpu::Layout::BTHD);
  const cpu::Result ref = cpu::reference(p);
  const std::vector<B16> q = cuda_emu::as<B16>(p.q), k = cuda_emu::as<B16>(p.k), v = cuda_emu::as<B16>(p.v),
                         dout = cuda_emu::as<B16>(p.dout);
  for (int setting = 0; setting < 3; ++setting) {  // both forward tile heights, both task orders
    const int m_tiles = setting == 0 ? 1 : 2;
    const bool tiles_inner = setting != 2;
    const std::string what = cpu::describe(p, cpu::Layout::BTHD) + " m_tiles=" + std::to_string(m_tiles) +
                             " tiles_inner=" + std::to_string(tiles_inner);
    Guarded<B16> out(q.size()), dq(q.size()), dk(k.size()), dv(k.size());
    Guarded<float> lse(ref.lse.size());
    MmaArgs a = shape_args(p.s, tiles_inner);
    a.q = bits(q), a.k = bits(k), a.v = bits(v), a.dout = bits(dout);
    a.qs = a.os = a.dos = a.dqs = p.qs, a.ks = a.vs = a.dks = a.dvs = p.kvs;
    a.out = bits(out), a.lse_out = lse.p(), a.dq = bits(dq), a.dk = bits(dk), a.dv = bits(dv);
    if (m_tiles == 1) run(attn_fwd_mma_kernel<DH, 1>, a, a.nqb * B * H, fwd_smem<DH, 1>(), what);
    else run(attn_fwd_mma_kernel<DH, 2>, a, (T + 127) / 128 * B * H, fwd_smem<DH, 2>(), what);
    EXPECT_LE(rel_err(out.p(), ref.out), 1e-2) << what;
    EXPECT_LE(rel_err(lse.p(), ref.lse), 1e-3) << what;

    const std::vector<float> dsum = cuda_emu::attention_dsum<float>(p, out.p());
    a.lse_in = lse.p(), a.dsum = dsum.data();
    run(attn_bwd_kv_mma_kernel<DH>, a, a.nkb * B * Hkv, kv_smem<DH>(), what + " dk/dv");
    run(attn_bwd_q_mma_kernel<DH>, a, a.nqb * B * H, q_smem<DH>(), what + " dq");
    EXPECT_LE(rel_err(dq.p(), ref.dq), 2e-2) << what;
    EXPECT_LE(rel_err(dk.p(), ref.dk), 2e-2) << what;
    EXPECT_LE(rel_err(dv.p(), ref.dv), 2e-2) << what;
    EXPECT_TRUE(out.guard_intact() && dq.guard_intact() && dk.guard_intact() && dv.guard_intact() &&
                lse.guard_intact())
        << what << ": a kernel wrote past its output";
  }
}

// Grouped queries (two q heads per kv head), a partial last tile, causal.
TEST(CudaAttentionMmaEmulated, HeadDim64CausalGroupedPartialTile) { check<64>(1, 2, 1, 100, true); }
// Without the mask; two batches; a full and a partial 64-row tile.
TEST(CudaAttentionMmaEmulated, HeadDim128NoMaskTwoBatches) { check<128>(2, 1, 1, 80, false); }
// The 3b presets' head dim; 128-query tiles: a full one and a partial one; three q heads per kv head.
TEST(CudaAttentionMmaEmulated, HeadDim96CausalFullAndPartial128QueryTiles) { check<96>(1, 3, 1, 150, true); }
// Fewer rows than one MMA tile: most of every fragment is padding.
TEST(CudaAttentionMmaEmulated, HeadDim64FiveRows) { check<64>(1, 2, 2, 5, true); }

}  // namespace
}  // namespace uoe::cuda::detail
