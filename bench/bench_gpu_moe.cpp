// GPU benchmarks of the fused MoE-family kernels: causal attention forward / backward (bf16 tensor cores, head
// dims 64 and 128, float32 scalar for reference) and the grouped expert FFN forward + backward against a dense
// GEMM chain of the same FLOPs. CUDA events, manual time, TFLOP/s counters; skips without a GPU.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "cuda/attention_mma.h"
#include "cuda/cuda_api.h"
#include "cuda/grouped_gemm.h"
#include "cuda/stream.h"
#include "gpu_timing.h"
#include "ops/kernels/gemm.h"
#include "ops/kernels/moe.h"

namespace {

using namespace uoe;

const Device kGpu = Device::cuda(0);

bool have_gpu(benchmark::State& state) {
  if (cuda::is_available()) return true;
  state.SkipWithError("no CUDA device visible (CPU-only machine): GPU benchmarks skipped");
  return false;
}

// ---- attention: B·T = 16384 tokens, H·Dh = 2048 (FlashAttention-2's benchmark shape), causal ------------------
// q, k, v, out, dout live as [B, T, H, Dh] (a fused QKV projection's layout) viewed as [B, H, T, Dh].
// Work: forward 4·B·H·T²·Dh / 2 (QKᵀ and PV over the lower triangle); backward 2.5× the forward.
enum class AttnDtype { Bf16, F32 };

void run_attention(benchmark::State& state, bool backward, AttnDtype dtype) {
  if (!have_gpu(state)) return;
  try {
    const int64_t Dh = state.range(0), T = state.range(1), H = 2048 / Dh, B = std::max<int64_t>(16384 / T, 1);
    // bf16: the forward's rows per warp 16 x m_tiles (third argument; 0: the default kernel) and the task order
    // (fourth: 0 the default, tiles inner; 1 heads inner), put back on the way out
    struct Settings {
      int m_tiles = cuda::detail::attention_forward_m_tiles();
      bool tiles_inner = cuda::detail::attention_tiles_inner();
      ~Settings() {
        cuda::detail::set_attention_forward_m_tiles(m_tiles);
        cuda::detail::set_attention_tiles_inner(tiles_inner);
      }
    } restore_settings;
    if (state.range(2) > 0) cuda::detail::set_attention_forward_m_tiles(int(state.range(2)));
    cuda::detail::set_attention_tiles_inner(state.range(3) == 0);
    const bool bf16 = dtype == AttnDtype::Bf16;
    const DType dt = bf16 ? DType::BFloat16 : DType::Float32;
    cuda::DeviceGuard guard(0);
    const kernels::AttnShape s{B, H, H, T, Dh, 1.0 / std::sqrt(double(Dh)), true};
    const kernels::AttnStrides st{T * H * Dh, Dh, H * Dh};
    Generator gen{uint64_t(T * 131 + Dh)};
    auto input = [&] { return randn({B, T, H, Dh}, {}, &gen).to(dt).to(kGpu); };
    const Tensor q = input(), k = input(), v = input(), dout = input();
    const TensorOptions o = TensorOptions{}.with_dtype(dt).with_device(kGpu);
    const Tensor out = empty({B, T, H, Dh}, o), dq = empty({B, T, H, Dh}, o), dk = empty({B, T, H, Dh}, o),
                 dv = empty({B, T, H, Dh}, o);
    const Tensor lse = empty({B, H, T}, TensorOptions{}.with_device(kGpu));
    auto forward = [&] {
      if (bf16)
        cuda::attention_forward_bf16(s, q.data_ptr<BFloat16>(), st, k.data_ptr<BFloat16>(), st,
                                     v.data_ptr<BFloat16>(), st, out.data_ptr<BFloat16>(), st, lse.data_ptr<float>());
      else
        cuda::attention_forward<float>(s, q.data_ptr<float>(), st, k.data_ptr<float>(), st, v.data_ptr<float>(), st,
                                       out.data_ptr<float>(), st, lse.data_ptr<float>());
    };
    auto grad = [&] {
      if (bf16)
        cuda::attention_backward_bf16(s, q.data_ptr<BFloat16>(), st, k.data_ptr<BFloat16>(), st,
                                      v.data_ptr<BFloat16>(), st, out.data_ptr<BFloat16>(), st, lse.data_ptr<float>(),
                                      dout.data_ptr<BFloat16>(), st, dq.data_ptr<BFloat16>(), st,
                                      dk.data_ptr<BFloat16>(), st, dv.data_ptr<BFloat16>(), st);
      else
        cuda::attention_backward<float>(s, q.data_ptr<float>(), st, k.data_ptr<float>(), st, v.data_ptr<float>(), st,
                                        out.data_ptr<float>(), st, lse.data_ptr<float>(), dout.data_ptr<float>(), st,
                                        dq.data_ptr<float>(), st, dk.data_ptr<float>(), st, dv.data_ptr<float>(), st);
    };
    forward();  // the backward reads out and lse
    const double seconds = backward ? time_with_events(state, grad) : time_with_events(state, forward);
    const double fwd_flops = 4.0 * double(B * H) * double(T) * double(T) * double(Dh) / 2.0;
    const double flops = (backward ? 2.5 : 1.0) * fwd_flops * double(state.iterations());
    state.counters["TFLOP/s"] = seconds > 0 ? flops / seconds * 1e-12 : 0.0;
    const bool tc = bf16 && cuda::attention_bf16_uses_tensor_cores(s, {q.raw_data(), k.raw_data(), v.raw_data()}, {st});
    state.SetLabel(std::string(bf16 ? "bf16" : "f32") + (tc ? " mma" : " scalar") + " B=" + std::to_string(B) +
                   " H=" + std::to_string(H) +
                   (tc && !backward ? " m_tiles=" + std::to_string(cuda::detail::attention_forward_m_tiles()) : "") +
                   (tc ? (cuda::detail::attention_tiles_inner() ? " tiles inner" : " heads inner") : ""));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

void BM_GpuAttentionFwdBf16(benchmark::State& state) { run_attention(state, false, AttnDtype::Bf16); }
void BM_GpuAttentionBwdBf16(benchmark::State& state) { run_attention(state, true, AttnDtype::Bf16); }
void BM_GpuAttentionFwdF32(benchmark::State& state) { run_attention(state, false, AttnDtype::F32); }
void BM_GpuAttentionBwdF32(benchmark::State& state) { run_attention(state, true, AttnDtype::F32); }

// Arguments: head dim, T, the forward's m-tiles (0: the default), task order (0: the default, 1: heads inner).
BENCHMARK(BM_GpuAttentionFwdBf16)
    ->ArgsProduct({{64, 128}, {1024, 2048, 4096, 8192}, {0}, {0}})
    ->Args({96, 1024, 0, 0})  // 3b-*'s head dim at its training length
    ->ArgsProduct({{64, 128}, {1024, 4096}, {1}, {0}})  // the 64-query-tile kernel beside the default
    ->ArgsProduct({{128}, {4096, 8192}, {0}, {1}})  // the other task order beside the default
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GpuAttentionBwdBf16)
    ->ArgsProduct({{64, 128}, {1024, 2048, 4096, 8192}, {0}, {0}})
    ->Args({96, 1024, 0, 0})
    ->ArgsProduct({{128}, {4096, 8192}, {0}, {1}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GpuAttentionFwdF32)->Args({64, 1024, 0, 0})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GpuAttentionBwdF32)->Args({64, 1024, 0, 0})->UseManualTime()->Unit(benchmark::kMillisecond);

// ---- expert FFN: m tokens per expert (balanced), two shapes (kExpertShapes) --------------------------------------
// float32 with TF32, or bfloat16 (float32 accumulation). Work (forward + backward) = 9 GEMMs of 2·P·d·D FLOPs
// (P = n·m pairs): forward H_g, H_p (kept for the backward), O; backward dY Wdᵀ, dWd, dWg, dWu, dX (two terms).
// The dense peer runs the same 9 GEMM shapes on one block of P rows in the same dtype (no gather, SwiGLU
// or combine; one GEMM per shape instead of one per expert). Both arms are timed alike for TFLOP/s, dense_TFLOP/s
// and their ratio: the mean of back-to-back calls between two events (seconds_per_call), the experts with a plan
// made once. The benchmark's own time and with_plan_TFLOP/s are the op as it runs: planning on the device (with its
// one host synchronisation, which leaves the GPU idle until the next launches arrive) once per forward.
template <typename S>
void gemm_as(bool ta, bool tb, int64_t M, int64_t N, int64_t K, const S* A, int64_t lda, const S* B, int64_t ldb,
             float beta, S* C, int64_t ldc) {
  if constexpr (std::is_same_v<S, BFloat16>) cuda::gemm_bf16(ta, tb, M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc);
  else cuda::gemm<float>(ta, tb, M, N, K, 1.f, A, lda, B, ldb, beta, C, ldc);
}

// Expert neurons [r0, D) of each expert. Shape 0: 8 experts top-2, d = 1024, D = 2048 (the small presets'
// proportions); shape 1: 64 experts top-8, d = 1536, D = 768 (3b-moe's experts); shape 2: 3b-uoe's expert part,
// neurons [12, 768) of 768 (756 wide: rows and the offset not 16-byte aligned); shape 3: the same 756 neurons
// zero-padded to 760 as ops::expert_ffn runs them on a GPU, aligned.
struct ExpertBenchShape {
  int64_t n, K, d, D, r0;
};
constexpr ExpertBenchShape kExpertShapes[] = {
    {8, 2, 1024, 2048, 0}, {64, 8, 1536, 768, 0}, {64, 8, 1536, 768, 12}, {64, 8, 1536, 760, 0}};

template <typename S>
void run_expert_ffn(benchmark::State& state) {
  if (!have_gpu(state)) return;
  constexpr bool bf16 = std::is_same_v<S, BFloat16>;
  const bool previous_tf32 = cuda::allow_tf32();
  try {
    const ExpertBenchShape& shape = kExpertShapes[state.range(1)];
    const int64_t m = state.range(0), n = shape.n, K = shape.K, d = shape.d, D = shape.D, Tn = n * m / K, P = n * m;
    const int64_t R = D - shape.r0;  // neurons run per expert
    cuda::DeviceGuard guard(0);
    cuda::set_allow_tf32(true);
    const kernels::ExpertShape s{Tn, K, n, d, d, D, shape.r0, D, false};
    std::vector<int64_t> slots(size_t(Tn * K));
    for (int64_t i = 0; i < Tn * K; ++i) slots[size_t(i)] = i % n;  // slot k of token t -> expert (tK + k) % n
    const Tensor idx = from_vector(slots, {Tn, K}).to(kGpu);
    Generator gen{uint64_t(m)};
    const DType dt = dtype_of<S>();
    auto input = [&](const Shape& shape, double scale) { return (randn(shape, {}, &gen) * scale).to(dt).to(kGpu); };
    const Tensor x = input({Tn, d}, 1.0), w = input({Tn, K}, 0.5), wg = input({n, d, D}, 0.03),
                 wu = input({n, d, D}, 0.03), wd = input({n, D, d}, 0.03), dy = input({Tn, d}, 1.0);
    const TensorOptions o = TensorOptions{}.with_dtype(dt).with_device(kGpu);
    const Tensor y = empty({Tn, d}, o), dx = empty({Tn, d}, o), dw = empty({Tn, K}, o), dwg = empty({n, d, D}, o),
                 dwu = empty({n, d, D}, o), dwd = empty({n, D, d}, o), h = empty({2, P, R}, o);
    auto f = [](const Tensor& t) { return t.data_ptr<S>(); };
    auto experts = [&](const kernels::DeviceExpertPlan& plan) {  // forward + backward
      if constexpr (bf16) {
        cuda::expert_ffn_forward_bf16(s, plan, f(x), nullptr, f(w), f(wg), f(wu), f(wd), f(y), f(h));
        cuda::expert_ffn_backward_bf16(s, plan, f(x), nullptr, f(w), f(wg), f(wu), f(wd), f(h), f(dy), f(dx), f(dw),
                                       nullptr, f(dwg), f(dwu), f(dwd));
      } else {
        cuda::expert_ffn_forward<float>(s, plan, f(x), nullptr, f(w), f(wg), f(wu), f(wd), f(y), f(h));
        cuda::expert_ffn_backward<float>(s, plan, f(x), nullptr, f(w), f(wg), f(wu), f(wd), f(h), f(dy), f(dx),
                                         f(dw), nullptr, f(dwg), f(dwu), f(dwd));
      }
    };
    auto plan = [&] { return cuda::plan_experts(idx.data_ptr<int64_t>(), Tn, K, n); };
    const double with_plan_s = time_with_events(state, [&] { experts(plan()); });  // the plan once per forward
    const kernels::DeviceExpertPlan made_once = plan();
    const double experts_s = seconds_per_call([&] { experts(made_once); });
    const double flops = 9.0 * 2.0 * double(P) * double(d) * double(R);
    const double tflops = experts_s > 0 ? flops / experts_s * 1e-12 : 0.0;
    const double with_plan_tflops = with_plan_s > 0 ? flops * double(state.iterations()) / with_plan_s * 1e-12 : 0.0;

    // Dense peer: the same GEMM shapes over one block of P rows.           X, dY: [P, d]; A, B, G: [P, D]
    const Tensor X = input({P, d}, 1.0), dY = input({P, d}, 1.0), A = input({P, D}, 1.0), Bm = input({P, D}, 1.0),
                 G = input({P, D}, 1.0), W1 = input({d, D}, 0.03), W2 = input({d, D}, 0.03), W3 = input({D, d}, 0.03);
    // [P, R] and [d, R] blocks inside [P, D] and [d, D] storage at column r0, [R, d] rows of W3 from row r0: the
    // experts' strides and offsets
    const int64_t r0 = shape.r0;
    const Tensor O = empty({P, d}, o), dX = empty({P, d}, o), dW1 = empty({d, D}, o), dW2 = empty({d, D}, o),
                 dW3 = empty({D, d}, o), H1 = empty({P, D}, o), H2 = empty({P, D}, o), H3 = empty({P, D}, o);
    auto dense_chain = [&] {
      gemm_as<S>(false, false, P, R, d, f(X), d, f(W1) + r0, D, 0.f, f(H1), D);   // H_g
      gemm_as<S>(false, false, P, R, d, f(X), d, f(W2) + r0, D, 0.f, f(H2), D);   // H_p
      gemm_as<S>(false, false, P, d, R, f(A), D, f(W3) + r0 * d, d, 0.f, f(O), d);  // O
      gemm_as<S>(false, true, P, R, d, f(dY), d, f(W3) + r0 * d, d, 0.f, f(H3), D);  // dY Wdᵀ
      gemm_as<S>(true, false, R, d, P, f(A), D, f(dY), d, 0.f, f(dW3) + r0 * d, d);  // dWd
      gemm_as<S>(true, false, d, R, P, f(X), d, f(G), D, 0.f, f(dW1) + r0, D);    // dWg
      gemm_as<S>(true, false, d, R, P, f(X), d, f(Bm), D, 0.f, f(dW2) + r0, D);   // dWu
      gemm_as<S>(false, true, P, d, R, f(Bm), D, f(W2) + r0, D, 0.f, f(dX), d);   // dX from dH_p
      gemm_as<S>(false, true, P, d, R, f(G), D, f(W1) + r0, D, 1.f, f(dX), d);    // + dH_g Wgᵀ
    };
    const double dense_s = seconds_per_call(dense_chain);
    const double dense_tflops = dense_s > 0 ? flops / dense_s * 1e-12 : 0.0;
    state.counters["TFLOP/s"] = tflops;
    state.counters["with_plan_TFLOP/s"] = with_plan_tflops;
    state.counters["dense_TFLOP/s"] = dense_tflops;
    state.counters["ratio"] = dense_tflops > 0 ? tflops / dense_tflops : 0.0;
    state.SetLabel(std::string(bf16 ? "bf16" : "f32+tf32") + " n=" + std::to_string(n) + " K=" + std::to_string(K) +
                   " d=" + std::to_string(d) + " neurons [" + std::to_string(shape.r0) + ", " + std::to_string(D) +
                   ") m=" + std::to_string(m) +
                   (cuda::grouped_gemm_fallback().empty() ? "" : " FALLBACK: " + cuda::grouped_gemm_fallback()));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
  cuda::set_allow_tf32(previous_tf32);
}
void BM_GpuExpertFfn(benchmark::State& state) { run_expert_ffn<float>(state); }
void BM_GpuExpertFfnBf16(benchmark::State& state) { run_expert_ffn<BFloat16>(state); }
BENCHMARK(BM_GpuExpertFfn)->Args({512, 0})->Args({2048, 0})->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GpuExpertFfnBf16)
    ->ArgsProduct({{512, 1024, 2048, 4096}, {0}})
    ->ArgsProduct({{512, 2048}, {1, 2, 3}})
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

// ---- grouped GEMM: the expert FFN's first stage at 3b-uoe's shape, bf16 -------------------------------------------
// 64 experts x m rows: H_g, H_p = X_e [m, 1536] W[e] [1536, 768], 128 problems. One cuda::gemm_grouped call
// (TFLOP/s) against the same problems one cuda::gemm_bf16 each (loop_TFLOP/s) and one dense GEMM pair over all
// 64 m rows (dense_TFLOP/s), the three timed alike (seconds_per_call); ratio = grouped / dense.
void BM_GpuGroupedGemmBf16(benchmark::State& state) {
  if (!have_gpu(state)) return;
  try {
    const int64_t m = state.range(0), n = 64, d = 1536, D = 768;
    cuda::DeviceGuard guard(0);
    Generator gen{uint64_t(m) + 17};
    auto input = [&](const Shape& shape) { return randn(shape, {}, &gen).to(DType::BFloat16).to(kGpu); };
    const Tensor X = input({n * m, d}), Wg = input({n, d, D}), Wu = input({n, d, D});
    const TensorOptions o = TensorOptions{}.with_dtype(DType::BFloat16).with_device(kGpu);
    const Tensor Hg = empty({n * m, D}, o), Hp = empty({n * m, D}, o);
    auto p = [](const Tensor& t) { return t.data_ptr<BFloat16>(); };
    std::vector<cuda::GemmProblem<BFloat16>> problems;
    for (int64_t e = 0; e < n; ++e) {
      problems.push_back({false, false, m, D, d, p(X) + e * m * d, d, p(Wg) + e * d * D, D, p(Hg) + e * m * D, D, false});
      problems.push_back({false, false, m, D, d, p(X) + e * m * d, d, p(Wu) + e * d * D, D, p(Hp) + e * m * D, D, false});
    }
    auto grouped = [&] { cuda::gemm_grouped(problems, "bench grouped gemm"); };
    time_with_events(state, grouped);
    const double grouped_s = seconds_per_call(grouped);
    const double flops = 2.0 * 2.0 * double(n * m) * double(d) * double(D);
    const double loop_s = seconds_per_call([&] {
      for (const auto& q : problems)
        cuda::gemm_bf16(false, false, q.M, q.N, q.K, 1.f, q.A, q.lda, q.B, q.ldb, 0.f, q.C, q.ldc);
    });
    const double dense_s = seconds_per_call([&] {
      cuda::gemm_bf16(false, false, n * m, D, d, 1.f, p(X), d, p(Wg), D, 0.f, p(Hg), D);
      cuda::gemm_bf16(false, false, n * m, D, d, 1.f, p(X), d, p(Wu), D, 0.f, p(Hp), D);
    });
    const double tflops = grouped_s > 0 ? flops / grouped_s * 1e-12 : 0.0;
    const double dense_tflops = dense_s > 0 ? flops / dense_s * 1e-12 : 0.0;
    state.counters["TFLOP/s"] = tflops;
    state.counters["loop_TFLOP/s"] = loop_s > 0 ? flops / loop_s * 1e-12 : 0.0;
    state.counters["dense_TFLOP/s"] = dense_tflops;
    state.counters["ratio"] = dense_tflops > 0 ? tflops / dense_tflops : 0.0;
    const std::string fallback = cuda::grouped_gemm_fallback();
    state.SetLabel("bf16 n=64 d=1536 D=768 m=" + std::to_string(m) + (fallback.empty() ? "" : " FALLBACK: " + fallback));
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}
BENCHMARK(BM_GpuGroupedGemmBf16)->Arg(128)->Arg(512)->Arg(2048)->UseManualTime()->Unit(benchmark::kMillisecond);

}  // namespace
