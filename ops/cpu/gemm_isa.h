// Internal GEMM interfaces: ISA selection (with a test override) and the per-ISA kernel tables.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <type_traits>

#include "core/half.h"
#include "ops/cpu/scratch.h"

namespace uoe::cpu::detail {

enum class GemmIsa : int { Auto = -1, Scalar = 0, Avx2 = 1, Avx512 = 2 };

// True if this CPU can run the given float GEMM code path (Auto and Scalar always can).
bool gemm_isa_supported(GemmIsa isa);
// Forces the float GEMM code path (Auto = best the CPU supports, the default). Returns false and
// changes nothing when the CPU cannot run it. Meant for tests; do not call while a gemm is running.
bool gemm_force_isa(GemmIsa isa);
// The code path float gemm uses now (never Auto).
GemmIsa gemm_active_isa();

// Calls f(std::integral_constant<int, mr>{}) for 1 <= mr <= R: the tile height as a compile-time constant.
template <int R, typename F>
void with_rows(int mr, F&& f) {
  if constexpr (R > 0) {
    if (mr == R) f(std::integral_constant<int, R>{});
    else with_rows<R - 1>(mr, f);
  }
}

// One ISA's packed-GEMM building blocks: operands stored as TS, packed as TP, C of type TC. With kp = kc rounded up
// to k_granule: packed A holds panels of MR rows, panel p at dst + p*MR*kp; packed B holds panels of NR
// columns, panel p at dst + p*NR*kp, columns past the edge and k past kc zero-filled. The layout inside a
// panel is the ISA's (float: A (i, k) at [k*MR + i], B (k, j) at [k*NR + j]). Buffers are 64-byte aligned.
template <typename TP, typename TC = TP, typename TS = TP>
struct GemmKernels {
  int mr, nr;       // register tile
  int64_t kc;       // largest K block; K is cut into equal blocks by K and this alone (never by
                    // the thread count), as the blocks fix the summation order
  int64_t mc;       // largest row block (A block mc x kc stays in L2)
  int64_t b_elems;  // largest packed B (K x NC elements) per column block
  // C[0:mr, 0:nr] = alpha * Apanel * Bpanel + beta * C (beta == 0: C not read); mr <= MR, nr <= NR;
  // kp is the padded depth of the panels.
  void (*micro)(int64_t kp, const TP* a, const TP* b, TC* c, int64_t ldc, int mr, int nr, TC alpha, TC beta);
  // Packs op(A)[0:mc, 0:kc]; A points at op(A)[0,0] (trans: stored [K,M]).
  void (*pack_a)(bool trans, const TS* A, int64_t lda, int64_t mc, int64_t kc, TP* dst);
  // Packs op(B)[0:kc, 0:nc]; B points at op(B)[0,0] (trans: stored [N,K]).
  void (*pack_b)(bool trans, const TS* B, int64_t ldb, int64_t kc, int64_t nc, TP* dst);
  int64_t k_granule = 1;  // panels are kc rounded up to a multiple of this deep (bf16 pairs: 2, AMX tiles: 32)
  // Optional: the micro-kernel reading A unpacked, mr rows of op(A) = A (not transposed) at a, row stride lda, kc
  // even; the same sums in the same order as micro on the packed panel, so the same bits.
  void (*micro_unpacked_a)(int64_t kc, const TS* a, int64_t lda, const TP* b, TC* c, int64_t ldc, int mr, int nr,
                           TC alpha, TC beta) = nullptr;
  // Optional: the last K block of a bfloat16 C, in one pass from the registers: the sums of micro (A packed), or of
  // micro_unpacked_a (A in place, when lda > 0), as out[i*ldo + j] = bfloat16(alpha * sum + partial[i*ldc + j])
  // rounded to nearest even (partial: the float sums of the earlier K blocks, only read; nullptr: none). AVX512-BF16
  // rounds as the CPU does, which flushes results below FLT_MIN to zero where float_to_bf16_bits keeps them.
  void (*micro_bf16_out)(int64_t kp, const TP* a, int64_t lda, const TP* b, const TC* partial, int64_t ldc,
                         BFloat16* out, int64_t ldo, int mr, int nr, TC alpha) = nullptr;
};

const GemmKernels<float>& gemm_kernels_avx512_f32();
const GemmKernels<float>& gemm_kernels_avx2_f32();
// The AVX-512 and AVX2 float kernels on bfloat16 operands, for the float32 path of the bfloat16 GEMM: the packing
// widens each element as it reads it (one pass, no staging copy), and micro_bf16_out rounds a bfloat16 C from the
// registers (as float_to_bf16_bits rounds). The same FMA chains as the float kernels on the widened operands, so
// the same bits.
const GemmKernels<float, float, BFloat16>& gemm_kernels_avx512_widened();
const GemmKernels<float, float, BFloat16>& gemm_kernels_avx2_widened();
// Those of the active float path (gemm_active_isa), the portable kernels' included (which have no micro_bf16_out).
const GemmKernels<float, float, BFloat16>& gemm_kernels_widened();

// bfloat16 GEMM code paths: VDPBF16PS (AVX512-BF16), AMX tiles (TDPBF16PS), or F32 (the float GEMM's kernels,
// each operand panel widened to float as it is packed) on CPUs with neither. The environment variable UOE_PIN_ISA
// (amx, avx512_bf16 or f32) forces one when the process first uses a bfloat16 GEMM.
enum class Bf16Isa : int { Auto = -1, F32 = 0, Avx512Bf16 = 1, Amx = 2 };

// The path Auto picks from what the CPU (and Linux) allow: AMX; else AVX512-BF16, except on Intel, where VDPBF16PS
// ran the GEMM at half the float32 kernels' rate (110 against 210 GFLOP/s, 2 threads, Xeon family 6 model 207,
// 2026-12-06; on AMD Zen 4 it ran at twice: 405 against 215); else F32.
Bf16Isa preferred_bf16_isa(bool amx, bool avx512_bf16, bool intel);
const char* bf16_isa_name(Bf16Isa isa);  // "amx", "avx512_bf16", "f32" (as UOE_PIN_ISA spells them), "auto"
// True if this CPU (and, for AMX, the kernel's permission) can run the path (Auto and F32 always can).
bool gemm_bf16_isa_supported(Bf16Isa isa);
// Forces the path (Auto = UOE_PIN_ISA, else preferred_bf16_isa). Returns false and changes nothing when
// the CPU cannot run it. Do not call while a gemm is running.
bool gemm_bf16_force_isa(Bf16Isa isa);
Bf16Isa gemm_bf16_active_isa();  // never Auto

// Packed layouts of the bfloat16 kernels: k is grouped in pairs (VNNI), a pair (k, k+1) of one row or column
// is 32 bits. B panels (both ISAs, NR = 32): pair p of column j at [(p*NR + j)*2 + (k&1)]. A panels: AVX512-BF16
// [(p*MR + i)*2 + (k&1)]; AMX row-major, row i at [i*kp] (a tile row is 32 consecutive k).
const GemmKernels<BFloat16, float>& gemm_kernels_avx512_bf16();
const GemmKernels<BFloat16, float>& gemm_kernels_amx_bf16();
// Packs op(B)[0:kc, 0:nc] (nc <= 32) into one VNNI panel 32 columns wide and kp deep (zero-filled).
void pack_b_vnni32(bool trans, const BFloat16* B, int64_t ldb, int64_t kc, int64_t kp, int64_t nc, BFloat16* dst);
// Asks Linux for the AMX tile data permission once per process; false if the kernel refuses (or no AMX).
bool amx_permitted();

// Runs one(b) for the batch's GEMMs b = 0..batch-1 of [M,K]x[K,N]. Small matrices (with distinct C): one whole
// GEMM per thread (each runs single-threaded, which gives the same bits as a threaded run). Large ones, or a
// shared C: in turn, threaded inside.
template <typename OneGemm>
void for_each_gemm(int64_t batch, int64_t M, int64_t N, int64_t K, bool shared_c, OneGemm one) {
  const int maxt = omp_in_parallel() ? 1 : omp_get_max_threads();
  const double flops = 2.0 * double(M) * double(N) * double(std::max<int64_t>(K, 1));
  const bool over_batch = maxt > 1 && batch > 1 && !shared_c && flops < 3.0e7;
  if (over_batch) {
    const int nt = int(std::min<int64_t>(maxt, batch));
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64_t b = 0; b < batch; ++b) one(b);
  } else {
    for (int64_t b = 0; b < batch; ++b) one(b);
  }
}

// Told that C's rows [i0, i1) x columns [j0, j1) hold their final values, on the thread that computed them, while
// they are still in its cache (each element of C is in exactly one such call).
using TileDone = std::function<void(int64_t i0, int64_t i1, int64_t j0, int64_t j1)>;

// The threaded packed driver of gemm.cpp with the given kernels (bit-identical whatever the thread count): bfloat16
// panels (AMX, AVX512-BF16), or float panels widened from bfloat16 as they are packed (gemm_kernels_widened: bit for
// bit the float GEMM of the widened operands).
template <typename TP>
void gemm_packed_bf16(const GemmKernels<TP, float, BFloat16>& ks, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                      float alpha, const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, float beta,
                      float* C, int64_t ldc, const TileDone& done = nullptr);
// C (bfloat16, ldc) = alpha op(A) op(B) with ks.micro_bf16_out: K blocks before the last sum into `partial` (float
// [M, N], row stride ldp), which the last one reads as it rounds into C.
template <typename TP>
void gemm_packed_bf16_out(const GemmKernels<TP, float, BFloat16>& ks, bool ta, bool tb, int64_t M, int64_t N, int64_t K,
                          float alpha, const BFloat16* A, int64_t lda, const BFloat16* B, int64_t ldb, float* partial,
                          int64_t ldp, BFloat16* C, int64_t ldc);

}  // namespace uoe::cpu::detail
