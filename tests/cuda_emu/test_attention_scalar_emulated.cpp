// The scalar CUDA attention kernels (cuda/attention_scalar.cuh) run unchanged on the CPU through the stand-in runtime
// of tests/cuda_emu/include, against the CPU kernel tests' float64 attention (tests/ops/cpu/attention_reference.h):
// float and double storage (tight tolerances) and bfloat16 storage computed in float (the fallback of bf16 calls the
// tensor-core kernels cannot take), each tile height, grouped queries, partial and causal tiles, the row sums D of the
// backward and the head-dim-0 forward. Outputs start as NaN with a guard past their end, so an element never written or
// one written past the end fails. The CPU-vs-CUDA parity tests (tests/cuda/) judge the kernels on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/attention_scalar.cuh"
#include "tests/cuda_emu/attention_case.h"

namespace uoe::cuda {
namespace {

using cuda_emu::Guarded, cuda_emu::rel_err;

// Storage S, compute C, BM-row tiles, operands in `layout`: forward, D, then dk/dv and dq, against the reference
// within `tol` (twice that for the gradients).
template <class S, class C, int BM>
void check(int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t Dh, bool causal, cpu::Layout layout, double tol) {
  const cpu::Problem p = cuda_emu::attention_problem(B, H, Hkv, T, Dh, causal, layout);
  const cpu::Result ref = cpu::reference(p);
  const std::vector<S> q = cuda_emu::as<S>(p.q), k = cuda_emu::as<S>(p.k), v = cuda_emu::as<S>(p.v),
                       dout = cuda_emu::as<S>(p.dout);
  const std::string what = cpu::describe(p, layout) + " BM=" + std::to_string(BM);
  Guarded<S> out(q.size()), dq(q.size()), dk(k.size()), dv(k.size());
  Guarded<C> lse(ref.lse.size()), dsum(ref.lse.size());
  Args<S, C> a = make_args<S, C>(p.s, BM);
  a.q = q.data(), a.k = k.data(), a.v = v.data(), a.dout = dout.data();
  a.qs = a.os = a.dos = a.dqs = p.qs, a.ks = a.vs = a.dks = a.dvs = p.kvs;
  a.out = out.p(), a.lse_out = lse.p(), a.dq = dq.p(), a.dk = dk.p(), a.dv = dv.p();
  cuda_emu::launch(unsigned(a.nqb * B * H), kThreads, [&] { attn_fwd_kernel<S, C, BM>(a); },
                   fwd_smem_elems(BM, Dh) * sizeof(C));
  EXPECT_LE(rel_err(out.p(), ref.out), tol) << what;
  EXPECT_LE(rel_err(lse.p(), ref.lse), tol / 10) << what;

  cuda_emu::launch(3, 256, [&] { attn_dsum_kernel<S, C>(B, H, T, Dh, out.p(), p.qs, dout.data(), p.qs, dsum.p()); });
  const std::vector<C> want = cuda_emu::attention_dsum<C>(p, out.p());
  for (size_t r = 0; r < want.size(); ++r)
    EXPECT_NEAR(dsum.p()[r], want[r], 1e-5 * (1 + std::abs(want[r]))) << what << " D row " << r;

  a.lse_in = lse.p(), a.dsum = dsum.p();
  cuda_emu::launch(unsigned(a.nkb * B * Hkv), kThreads, [&] { attn_bwd_kv_kernel<S, C, BM>(a); },
                   kv_smem_elems(BM, Dh) * sizeof(C));
  cuda_emu::launch(unsigned(a.nqb * B * H), kThreads, [&] { attn_bwd_q_kernel<S, C, BM>(a); },
                   q_smem_elems(BM, Dh) * sizeof(C));
  EXPECT_LE(rel_err(dq.p(), ref.dq), 2 * tol) << what;
  EXPECT_LE(rel_err(dk.p(), ref.dk), 2 * tol) << what;
  EXPECT_LE(rel_err(dv.p(), ref.dv), 2 * tol) << what;
  EXPECT_TRUE(out.guard_intact() && dq.guard_intact() && dk.guard_intact() && dv.guard_intact() &&
              lse.guard_intact() && dsum.guard_intact())
      << what << ": a kernel wrote past its output";
}

// Float's tiles (64 rows), grouped queries, a partial last tile, causal.
TEST(CudaAttentionScalarEmulated, FloatCausalGrouped64RowTiles) {
  check<float, float, 64>(1, 2, 1, 100, 64, true, cpu::Layout::BTHD, 1e-5);
}
// Double's tiles (32 rows), an odd head dim, two batches, without the mask.
TEST(CudaAttentionScalarEmulated, DoubleNoMask32RowTiles) {
  check<double, double, 32>(2, 2, 2, 70, 40, false, cpu::Layout::BHTD, 1e-12);
}
// bfloat16 storage computed in float (head dim 32: no tensor-core kernel), three q heads per kv head, 16-row tiles
// (the height for head dims too large for the others).
TEST(CudaAttentionScalarEmulated, Bf16StorageCausal16RowTiles) {
  check<__nv_bfloat16, float, 16>(1, 3, 1, 45, 32, true, cpu::Layout::BHTD, 1e-2);
}

// Head dim 0: every score is 0, so lse is the log of the number of keys a query sees.
TEST(CudaAttentionScalarEmulated, HeadDimZeroLseCountsVisibleKeys) {
  for (const bool causal : {false, true}) {
    const int64_t rows = 2 * 3 * 7, T = 7;
    Guarded<float> lse{size_t(rows)};
    cuda_emu::launch(2, 32, [&] { attn_empty_lse_kernel<float>(rows, T, causal, lse.p()); });
    for (int64_t r = 0; r < rows; ++r)
      EXPECT_FLOAT_EQ(lse.p()[r], std::log(float(causal ? r % T + 1 : T))) << "causal=" << causal << " row " << r;
    EXPECT_TRUE(lse.guard_intact());
  }
}

}  // namespace
}  // namespace uoe::cuda
