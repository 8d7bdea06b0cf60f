// bfloat16 GEMM: path selection (CPUID, the Linux AMX permission, UOE_PIN_ISA), the float32 route for CPUs with no
// bfloat16 instructions, bfloat16 C, and batching.
#include "ops/cpu/gemm_bf16.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "core/error.h"
#include "core/simd.h"
#include "core/slow_paths.h"
#include "ops/kernels/gemm.h"
#include "ops/cpu/gemm_isa.h"

namespace uoe::cpu {
namespace detail {
namespace {

// Both need AVX-512, which a build pinned below x86-64-v4 does not run (pinned_isa_level).
bool cpu_has_avx512_bf16() {
  return pinned_isa_level() >= 4 && __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

bool cpu_has_amx() {
  return pinned_isa_level() >= 4 && __builtin_cpu_supports("amx-tile") && __builtin_cpu_supports("amx-bf16") &&
         __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("fma");
}

bool can_run(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::Amx: return cpu_has_amx() && amx_permitted();
    case Bf16Isa::Avx512Bf16: return cpu_has_avx512_bf16();
    default: return true;
  }
}

Bf16Isa best_isa() {
  if (cpu_has_amx() && !amx_permitted())
    slow_paths::count("gemm_bf16.amx_refused",
                      "the CPU has AMX but Linux refused the tile permission (arch_prctl ARCH_REQ_XCOMP_PERM): "
                      "bfloat16 GEMMs run on AVX512-BF16 or float32 instead, several times slower");
  return preferred_bf16_isa(can_run(Bf16Isa::Amx), can_run(Bf16Isa::Avx512Bf16), __builtin_cpu_is("intel"));
}

// UOE_PIN_ISA, else the best path of this CPU.
Bf16Isa default_isa() {
  const char* pin = std::getenv("UOE_PIN_ISA");
  if (!pin || !*pin) return best_isa();
  for (Bf16Isa isa : {Bf16Isa::Amx, Bf16Isa::Avx512Bf16, Bf16Isa::F32}) {
    if (std::strcmp(pin, bf16_isa_name(isa)) != 0) continue;
    UOE_CHECK(can_run(isa), "UOE_PIN_ISA=", pin, ": this CPU (or, for amx, the Linux kernel) cannot run that ",
              "bfloat16 GEMM path");
    return isa;
  }
  fail("UOE_PIN_ISA=", pin, ": expected amx, avx512_bf16 or f32 (the bfloat16 GEMM path to force)");
}

std::atomic<int> g_forced_isa{int(Bf16Isa::Auto)};

// C (float32) = alpha op(A) op(B) + beta C; `done` hears of every block of C once it is final.
void gemm_float_out(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t lda,
                    const BFloat16* B, int64_t ldb, float beta, float* C, int64_t ldc, const TileDone& done = nullptr) {
  const Bf16Isa isa = K <= 0 || alpha == 0.0f ? Bf16Isa::F32 : gemm_bf16_active_isa();
  switch (isa) {
    case Bf16Isa::Amx:
      gemm_packed_bf16(gemm_kernels_amx_bf16(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, done);
      return;
    case Bf16Isa::Avx512Bf16:
      gemm_packed_bf16(gemm_kernels_avx512_bf16(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, done);
      return;
    default:
      if (K > 0 && alpha != 0.0f)
        return gemm_packed_bf16(gemm_kernels_widened(), ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc, done);
      gemm<float>(ta, tb, M, N, 0, alpha, nullptr, 1, nullptr, 1, beta, C, ldc);  // C = beta * C, A and B not read
      if (done) done(0, M, 0, N);
  }
}

// This thread's float32 scratch of at least n elements, never initialised (a vector's resize zero-filled each
// growth as GEMM sizes alternate within a step: 1% of a tiny bf16 step went to that memset).
float* result_scratch(size_t n) {
  thread_local Scratch scratch;
  return static_cast<float*>(scratch.get(n * sizeof(float)));
}

// Rows [0, M): where the kernels can (GemmKernels::micro_bf16_out: the AVX512-BF16 kernels, and the AVX-512 and
// AVX2 float kernels on the f32 path), the last K block rounds each tile into C from the registers (the K blocks
// before it sum into a float32 scratch [M, N]); else the float32 result goes to that scratch and each finished
// block of it is rounded into C (C = round(result + beta C)) by the thread that computed it, while in its cache
// (AMX's tiles leave through memory in any case).
void gemm_bf16_rows(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t lda,
                    const BFloat16* B, int64_t ldb, float beta, BFloat16* C, int64_t ldc) {
  float* r = result_scratch(size_t(M * N));
  if (K > 0 && alpha != 0.0f && beta == 0.0f) {
    const Bf16Isa isa = gemm_bf16_active_isa();
    if (isa == Bf16Isa::Avx512Bf16)
      return gemm_packed_bf16_out(gemm_kernels_avx512_bf16(), ta, tb, M, N, K, alpha, A, lda, B, ldb, r, N, C, ldc);
    if (isa == Bf16Isa::F32 && gemm_kernels_widened().micro_bf16_out)
      return gemm_packed_bf16_out(gemm_kernels_widened(), ta, tb, M, N, K, alpha, A, lda, B, ldb, r, N, C, ldc);
  }
  const TileDone round_block = [&](int64_t i0, int64_t i1, int64_t j0, int64_t j1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* ri = r + i * N;
      BFloat16* c = C + i * ldc;
      if (beta == 0.0f) convert_f32_to_bf16(ri + j0, c + j0, j1 - j0);
      else
        for (int64_t j = j0; j < j1; ++j) c[j] = BFloat16(ri[j] + beta * float(c[j]));
    }
  };
  gemm_float_out(ta, tb, M, N, K, alpha, A, lda, B, ldb, 0.0f, r, N, round_block);
}

// At most this many bytes of float32 result per pass: a wide product (an LM head's [tokens, vocab] logits) runs in
// passes of rows, so that no float32 copy of the whole of it is made or kept. The rows of a pass give the bits of the
// whole product (blocking never changes a sum); B is packed again each pass, under 1% of a pass's work while a pass
// has 512 rows or more (N up to 32K).
constexpr int64_t kResultBytesPerPass = int64_t{64} << 20;

void gemm_bf16_out(bool ta, bool tb, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t lda,
                   const BFloat16* B, int64_t ldb, float beta, BFloat16* C, int64_t ldc) {
  const int64_t rows = std::clamp<int64_t>(kResultBytesPerPass / (N * int64_t(sizeof(float))), 1, M);
  for (int64_t i0 = 0; i0 < M; i0 += rows)  // op(A) rows i0.. (stored [K, M] when ta)
    gemm_bf16_rows(ta, tb, std::min(rows, M - i0), N, K, alpha, ta ? A + i0 : A + i0 * lda, lda, B, ldb, beta,
                   C + i0 * ldc, ldc);
}

}  // namespace

Bf16Isa preferred_bf16_isa(bool amx, bool avx512_bf16, bool intel) {
  if (amx) return Bf16Isa::Amx;
  return avx512_bf16 && !intel ? Bf16Isa::Avx512Bf16 : Bf16Isa::F32;
}

const char* bf16_isa_name(Bf16Isa isa) {
  switch (isa) {
    case Bf16Isa::Amx: return "amx";
    case Bf16Isa::Avx512Bf16: return "avx512_bf16";
    case Bf16Isa::F32: return "f32";
    default: return "auto";
  }
}

bool gemm_bf16_isa_supported(Bf16Isa isa) { return can_run(isa); }

bool gemm_bf16_force_isa(Bf16Isa isa) {
  if (!can_run(isa)) return false;
  g_forced_isa.store(int(isa), std::memory_order_relaxed);
  return true;
}

Bf16Isa gemm_bf16_active_isa() {
  const int forced = g_forced_isa.load(std::memory_order_relaxed);
  if (forced != int(Bf16Isa::Auto)) return Bf16Isa(forced);
  static const Bf16Isa chosen = default_isa();
  return chosen;
}

}  // namespace detail

template <typename TC>
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
               int64_t lda, const BFloat16* B, int64_t ldb, float beta, TC* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if constexpr (std::is_same_v<TC, float>)
    detail::gemm_float_out(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  else
    detail::gemm_bf16_out(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename TC>
void gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const BFloat16* A, int64_t lda, int64_t stride_a, const BFloat16* B, int64_t ldb,
                       int64_t stride_b, float beta, TC* C, int64_t ldc, int64_t stride_c) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  detail::for_each_gemm(batch, M, N, K, stride_c == 0, [&](int64_t b) {
    gemm_bf16<TC>(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb, beta,
                  C + b * stride_c, ldc);
  });
}

template void gemm_bf16<float>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                               const BFloat16*, int64_t, float, float*, int64_t);
template void gemm_bf16<BFloat16>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                                  const BFloat16*, int64_t, float, BFloat16*, int64_t);
template void gemm_batched_bf16<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*,
                                       int64_t, int64_t, const BFloat16*, int64_t, int64_t, float, float*, int64_t,
                                       int64_t);
template void gemm_batched_bf16<BFloat16>(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*,
                                          int64_t, int64_t, const BFloat16*, int64_t, int64_t, float, BFloat16*,
                                          int64_t, int64_t);

// The family's bfloat16-result entry points (ops/kernels/gemm.h).
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
               int64_t lda, const BFloat16* B, int64_t ldb, float beta, BFloat16* C, int64_t ldc, const char*) {
  gemm_bf16<BFloat16>(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const BFloat16* A, int64_t lda, int64_t stride_a, const BFloat16* B, int64_t ldb,
                       int64_t stride_b, float beta, BFloat16* C, int64_t ldc, int64_t stride_c, const char*) {
  gemm_batched_bf16<BFloat16>(batch, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b, beta, C,
                              ldc, stride_c);
}

}  // namespace uoe::cpu
