// uoe::cuda grouped SwiGLU experts (expert_ffn forward and backward): gather rows by expert, one grouped cuBLAS call
// per GEMM stage, SwiGLU, combine and scatter back (the row kernels: cuda/moe_rows.cuh); float, double and bfloat16.
#include "ops/kernels/moe.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "cuda/grouped_gemm.h"
#include "cuda/moe_common.cuh"
#include "cuda/moe_rows.cuh"

namespace uoe::cuda {
namespace {

unsigned row_blocks(int64_t rows) { return unsigned(std::clamp<int64_t>(rows, 1, int64_t(1) << 20)); }

// Zeroes `rows` runs of `width` elements, consecutive runs `pitch` elements apart.
template <typename T>
void zero_2d(const LaunchContext& c, T* p, int64_t pitch, int64_t width, int64_t rows, const char* op) {
  if (!p || width <= 0 || rows <= 0) return;
  UOE_CUDA_CHECK(op, cudaMemset2DAsync(p, size_t(pitch) * sizeof(T), 0, size_t(width) * sizeof(T), size_t(rows),
                                       c.stream));
}

// uoe::BFloat16 -> __nv_bfloat16 pointers (the same 16 bits).
const __nv_bfloat16* nv(const BFloat16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* nv(BFloat16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

// The GEMMs of one stage of the experts (one or more per expert, none overlapping another's output), collected
// and issued as one grouped cuBLAS call (cuda/grouped_gemm.h): C = op(A) op(B), or C += op(A) op(B).
template <typename S>
class StageGemms {
 public:
  using Blas = std::conditional_t<std::is_same_v<S, __nv_bfloat16>, BFloat16, S>;  // the grouped GEMM's type
  explicit StageGemms(const char* op) : op_(op) {}
  void add(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda, const S* B, int64_t ldb,
           S* C, int64_t ldc, bool accumulate = false) {
    problems_.push_back({ta, tb, M, N, K, reinterpret_cast<const Blas*>(A), lda, reinterpret_cast<const Blas*>(B), ldb,
                         reinterpret_cast<Blas*>(C), ldc, accumulate});
  }
  void run() {
    gemm_grouped(problems_, op_);
    problems_.clear();
  }

 private:
  const char* op_;
  std::vector<GemmProblem<Blas>> problems_;
};

// ---- grouped SwiGLU experts -------------------------------------------------------------------------------
// The device arrays of a plan, laid out in its storage as [pair | row | row_expert].
PlanView view_of(const DeviceExpertPlan& plan, const ExpertShape& s) {
  PlanView v{};
  v.pair = plan.storage.data_ptr<int64_t>();
  v.row = v.pair + plan.rows();
  v.row_expert = v.row + s.T * s.K;
  return v;
}

void check_plan(const ExpertShape& s, const DeviceExpertPlan& plan, const char* op) {
  UOE_CHECK(int64_t(plan.offsets.size()) == s.n + 1 && plan.bad_slot < 0 && plan.storage.defined() &&
                plan.storage.numel() == 2 * plan.rows() + s.T * s.K,
            "[", op, "] expert plan does not match the shape (T=", s.T, ", K=", s.K, ", n=", s.n, ")");
}

// Zeroes the weight gradients where no GEMM writes: outside the neuron range [r0, r1) and, entirely, experts
// without rows (all of it when `all`).
template <typename T>
void zero_weight_grads(const LaunchContext& c, const ExpertShape& s, const DeviceExpertPlan& plan, bool all, T* dwg, T* dwu, T* dwd,
                       const char* op) {
  const int64_t n = s.n, d = s.d, dg = s.dg, D = s.D;
  if (all) {
    zero(c, dwg, n * dg * D, op);
    zero(c, dwu, n * d * D, op);
    zero(c, dwd, n * D * d, op);
    return;
  }
  // dwg: [n*dg, D] and dwu: [n*d, D]: columns [0, r0) and [r1, D) of every row.
  zero_2d(c, dwg, D, s.r0, n * dg, op);
  zero_2d(c, dwg ? dwg + s.r1 : nullptr, D, D - s.r1, n * dg, op);
  zero_2d(c, dwu, D, s.r0, n * d, op);
  zero_2d(c, dwu ? dwu + s.r1 : nullptr, D, D - s.r1, n * d, op);
  // dwd: [n, D, d]: rows [0, r0) and [r1, D) of every expert.
  zero_2d(c, dwd, D * d, s.r0 * d, n, op);
  zero_2d(c, dwd ? dwd + s.r1 * d : nullptr, D * d, (D - s.r1) * d, n, op);
  for (int64_t e = 0; e < n; ++e)
    if (plan.offsets[size_t(e + 1)] == plan.offsets[size_t(e)]) {
      zero(c, dwg ? dwg + e * dg * D : nullptr, dg * D, op);
      zero(c, dwu ? dwu + e * d * D : nullptr, d * D, op);
      zero(c, dwd ? dwd + e * D * d : nullptr, D * d, op);
    }
}

// expert_ffn on storage S (float, double, or __nv_bfloat16 computed in float32 with bfloat16 GEMMs).
template <typename S>
void expert_forward(const ExpertShape& s, const DeviceExpertPlan& plan, const S* x, const S* gate, const S* weights,
                    const S* wg, const S* wu, const S* wd, S* y, S* h) {
  const char* op = "expert_ffn";
  check_plan(s, plan, op);
  if (s.T == 0 || s.d == 0) return;
  const LaunchContext c = launch_context(op);
  const int64_t P = plan.rows(), R = s.r1 - s.r0, d = s.d, dg = s.dg, D = s.D;
  if (P == 0 || R == 0) return zero(c, y, s.T * d, op);  // no pair or no neuron contributes
  const PlanView pv = view_of(plan, s);
  // Gathered rows and per-row activations (H_g, H_p in h when it is kept).  xs, o: [P, d]; gs: [P, dg]; a: [P, R]
  DeviceBuffer xs = buffer<S>(c, P * d), gs = buffer<S>(c, gate ? P * dg : 0), kept = buffer<S>(c, h ? 0 : 2 * P * R),
               a = buffer<S>(c, P * R), o = buffer<S>(c, P * d);
  S* hg = h ? h : kept.get<S>();  // [P, R]
  S* hp = hg + P * R;             // [P, R]
  gather_rows_kernel<S><<<row_blocks(P), kThreads, 0, c.stream>>>(
      P, s.K, s.gate_rows(), d, dg, pv, x, xs.get<S>(), gate, gs.get<S>(), nullptr, nullptr, nullptr, nullptr,
      vec16_rows<S>(d, {x, xs.get<S>()}), vec16_rows<S>(dg, {gate, gs.get<S>()}));
  check_launch(op);
  const S* G = gate ? gs.get<S>() : xs.get<S>();
  StageGemms<S> gemms(op);
  for (int64_t e = 0; e < s.n; ++e) {  // H_g = G_e Wg[e][:, r0:r1], H_p = X_e Wu[e][:, r0:r1]
    const int64_t off = plan.offsets[size_t(e)], m = plan.offsets[size_t(e + 1)] - off;
    if (m == 0) continue;
    gemms.add(false, false, m, R, dg, G + off * dg, dg, wg + e * dg * D + s.r0, D, hg + off * R, R);
    gemms.add(false, false, m, R, d, xs.get<S>() + off * d, d, wu + e * d * D + s.r0, D, hp + off * R, R);
  }
  gemms.run();
  swiglu_forward_kernel<S><<<blocks_for(P * R), kThreads, 0, c.stream>>>(P * R, hg, hp, a.get<S>(),
                                                                         vec8_bf16<S>(P * R, {hg, hp, a.get<S>()}));
  check_launch(op);
  for (int64_t e = 0; e < s.n; ++e) {  // O_e = A_e Wd[e][r0:r1, :]
    const int64_t off = plan.offsets[size_t(e)], m = plan.offsets[size_t(e + 1)] - off;
    if (m == 0) continue;
    gemms.add(false, false, m, d, R, a.get<S>() + off * R, R, wd + (e * D + s.r0) * d, d, o.get<S>() + off * d, d);
  }
  gemms.run();
  combine_kernel<S><<<row_blocks(s.T), kThreads, 0, c.stream>>>(s.T, s.K, d, pv, weights, o.get<S>(), y,
                                                                 vec8_bf16<S>(d, {o.get<S>(), y}));
  check_launch(op);
}

template <typename S>
void expert_backward(const ExpertShape& s, const DeviceExpertPlan& plan, const S* x, const S* gate, const S* weights,
                     const S* wg, const S* wu, const S* wd, const S* h, const S* dy, S* dx, S* dweights, S* dgate,
                     S* dwg, S* dwu, S* dwd) {
  const char* op = "expert_ffn backward";
  check_plan(s, plan, op);
  if (!gate) dgate = nullptr;
  const LaunchContext c = launch_context(op);
  const int64_t P = plan.rows(), R = s.r1 - s.r0, d = s.d, dg = s.dg, D = s.D, K = s.K, n = s.n;
  const bool trivial = P == 0 || R == 0;  // every gradient is 0
  zero_weight_grads(c, s, plan, trivial, dwg, dwu, dwd, op);
  if (trivial) {
    zero(c, dx, s.T * d, op);
    zero(c, dweights, s.T * K, op);
    zero(c, dgate, s.T * s.gate_rows() * dg, op);
    return;
  }
  const PlanView pv = view_of(plan, s);
  // Gathered per sorted row: inputs, dy, routing weight; the activations' gradients.
  DeviceBuffer xs = buffer<S>(c, P * d), gs = buffer<S>(c, gate ? P * dg : 0), dys = buffer<S>(c, P * d),
               ws = buffer<S>(c, P), dhg = buffer<S>(c, P * R), dhp = buffer<S>(c, P * R), gb = buffer<S>(c, P * R),
               dxs = buffer<S>(c, dx ? P * d : 0), dgs = buffer<S>(c, dgate ? P * dg : 0);
  const S *hg = h, *hp = h + P * R;  // the forward's H_g, H_p [P, R]
  gather_rows_kernel<S><<<row_blocks(P), kThreads, 0, c.stream>>>(
      P, K, s.gate_rows(), d, dg, pv, x, xs.get<S>(), gate, gs.get<S>(), dy, dys.get<S>(), weights, ws.get<S>(),
      vec16_rows<S>(d, {x, xs.get<S>(), dy, dys.get<S>()}), vec16_rows<S>(dg, {gate, gs.get<S>()}));
  check_launch(op);
  const S* G = gate ? gs.get<S>() : xs.get<S>();
  StageGemms<S> gemms(op);
  for (int64_t e = 0; e < n; ++e) {  // gb = dY_e Wd[e][r0:r1, :]^T
    const int64_t off = plan.offsets[size_t(e)], m = plan.offsets[size_t(e + 1)] - off;
    if (m == 0) continue;
    gemms.add(false, true, m, R, d, dys.get<S>() + off * d, d, wd + (e * D + s.r0) * d, d, gb.get<S>() + off * R, R);
  }
  gemms.run();
  {  // gb <- w A, dH_g, dH_p, dweights of the selected slots
    const int warps = kThreads / 32;
    const unsigned blocks = unsigned(std::clamp<int64_t>((P + warps - 1) / warps, 1, int64_t(1) << 20));
    const bool vec = vec8_bf16<S>(R, {hg, hp, gb.get<S>(), dhg.get<S>(), dhp.get<S>()});
    swiglu_backward_kernel<S><<<blocks, kThreads, 0, c.stream>>>(P, R, ws.get<S>(), hg, hp, gb.get<S>(),
                                                                 dhg.get<S>(), dhp.get<S>(), pv, dweights, vec);
    check_launch(op);
  }
  // Two grouped calls: every product that writes its own output, then the one that accumulates onto dX_e.
  StageGemms<S> accumulate(op);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t off = plan.offsets[size_t(e)], m = plan.offsets[size_t(e + 1)] - off;
    if (m == 0) continue;  // its weight gradients were zeroed above
    const S *Ge = G + off * dg, *Xe = xs.get<S>() + off * d, *dYe = dys.get<S>() + off * d;
    const S *hge = dhg.get<S>() + off * R, *hpe = dhp.get<S>() + off * R, *gbe = gb.get<S>() + off * R;
    const S *wge = wg + e * dg * D + s.r0, *wue = wu + e * d * D + s.r0;
    // Weight gradients over this expert's rows: dWd = (w A)^T dY, dWg = G^T dH_g, dWu = X^T dH_p.
    if (dwd) gemms.add(true, false, R, d, m, gbe, R, dYe, d, dwd + (e * D + s.r0) * d, d);
    if (dwg) gemms.add(true, false, dg, R, m, Ge, dg, hge, R, dwg + e * dg * D + s.r0, D);
    if (dwu) gemms.add(true, false, d, R, m, Xe, d, hpe, R, dwu + e * d * D + s.r0, D);
    // dX_e = dH_p Wu^T (+ dH_g Wg^T, or that term into dG_e with a gate input)
    if (dx) gemms.add(false, true, m, d, R, hpe, R, wue, D, dxs.get<S>() + off * d, d);
    if (dgate)
      gemms.add(false, true, m, dg, R, hge, R, wge, D, dgs.get<S>() + off * dg, dg);
    else if (dx && !gate)
      accumulate.add(false, true, m, d, R, hge, R, wge, D, dxs.get<S>() + off * d, d, /*accumulate=*/true);
  }
  gemms.run();
  accumulate.run();
  if ((dx || dgate || dweights) && s.T > 0) {
    scatter_back_kernel<S><<<row_blocks(s.T), kThreads, 0, c.stream>>>(
        s.T, K, s.gate_rows(), d, dg, pv, dxs.get<S>(), dx, dgs.get<S>(), dgate, dweights,
        vec8_bf16<S>(d, {dxs.get<S>(), dx}));
    check_launch(op);
  }
}

}  // namespace

template <typename T>
void expert_ffn_forward(const ExpertShape& s, const DeviceExpertPlan& plan, const T* x, const T* gate, const T* weights,
                        const T* wg, const T* wu, const T* wd, T* y, T* h) {
  expert_forward(s, plan, x, gate, weights, wg, wu, wd, y, h);
}

template <typename T>
void expert_ffn_backward(const ExpertShape& s, const DeviceExpertPlan& plan, const T* x, const T* gate, const T* weights,
                         const T* wg, const T* wu, const T* wd, const T* h, const T* dy, T* dx, T* dweights, T* dgate,
                         T* dwg, T* dwu, T* dwd) {
  expert_backward(s, plan, x, gate, weights, wg, wu, wd, h, dy, dx, dweights, dgate, dwg, dwu, dwd);
}

void expert_ffn_forward_bf16(const ExpertShape& s, const DeviceExpertPlan& plan, const BFloat16* x, const BFloat16* gate,
                             const BFloat16* weights, const BFloat16* wg, const BFloat16* wu, const BFloat16* wd,
                             BFloat16* y, BFloat16* h) {
  expert_forward(s, plan, nv(x), nv(gate), nv(weights), nv(wg), nv(wu), nv(wd), nv(y), nv(h));
}

void expert_ffn_backward_bf16(const ExpertShape& s, const DeviceExpertPlan& plan, const BFloat16* x, const BFloat16* gate,
                              const BFloat16* weights, const BFloat16* wg, const BFloat16* wu, const BFloat16* wd,
                              const BFloat16* h, const BFloat16* dy, BFloat16* dx, BFloat16* dweights,
                              BFloat16* dgate, BFloat16* dwg, BFloat16* dwu, BFloat16* dwd) {
  expert_backward(s, plan, nv(x), nv(gate), nv(weights), nv(wg), nv(wu), nv(wd), nv(h), nv(dy), nv(dx),
                  nv(dweights), nv(dgate), nv(dwg), nv(dwu), nv(dwd));
}

#define UOE_CUDA_EXPERT_INSTANTIATE(T)                                                                                \
  template void expert_ffn_forward<T>(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*, const T*,  \
                                      const T*, const T*, T*, T*);                                                    \
  template void expert_ffn_backward<T>(const ExpertShape&, const DeviceExpertPlan&, const T*, const T*, const T*, const T*, \
                                       const T*, const T*, const T*, const T*, T*, T*, T*, T*, T*, T*);
UOE_CUDA_EXPERT_INSTANTIATE(float)
UOE_CUDA_EXPERT_INSTANTIATE(double)
#undef UOE_CUDA_EXPERT_INSTANTIATE

}  // namespace uoe::cuda
