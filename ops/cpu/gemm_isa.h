// Internal GEMM interfaces: ISA selection (with a test override) and the per-ISA kernel tables.
#pragma once

#include <cstdint>

namespace uoe::cpu::detail {

enum class GemmIsa : int { Auto = -1, Scalar = 0, Avx2 = 1, Avx512 = 2 };

// True if this CPU can run the given float GEMM code path (Auto and Scalar always can).
bool gemm_isa_supported(GemmIsa isa);
// Forces the float GEMM code path (Auto = best the CPU supports, the default). Returns false and
// changes nothing when the CPU cannot run it. Meant for tests; do not call while a gemm is running.
bool gemm_force_isa(GemmIsa isa);
// The code path float gemm uses now (never Auto).
GemmIsa gemm_active_isa();

// One ISA's packed-GEMM building blocks. Packed A: panels of MR rows, panel p at dst + p*MR*kc,
// element (i, k) at [k*MR + i]. Packed B: panels of NR columns, panel p at dst + p*NR*kc, element
// (k, j) at [k*NR + j], columns past the edge zero-filled. Buffers are 64-byte aligned.
template <typename T>
struct GemmKernels {
  int mr, nr;       // register tile
  int64_t kc;       // largest K block; K is cut into equal blocks by K and this alone (never by
                    // the thread count), as the blocks fix the summation order
  int64_t mc;       // largest row block (A block mc x kc stays in L2)
  int64_t b_elems;  // largest packed B (K x NC elements) per column block
  // C[0:mr, 0:nr] = alpha * Apanel * Bpanel + beta * C (beta == 0: C not read); mr <= MR, nr <= NR.
  void (*micro)(int64_t kc, const T* a, const T* b, T* c, int64_t ldc, int mr, int nr, T alpha, T beta);
  // Packs op(A)[0:mc, 0:kc]; A points at op(A)[0,0] (trans: stored [K,M]).
  void (*pack_a)(bool trans, const T* A, int64_t lda, int64_t mc, int64_t kc, T* dst);
  // Packs op(B)[0:kc, 0:nc]; B points at op(B)[0,0] (trans: stored [N,K]).
  void (*pack_b)(bool trans, const T* B, int64_t ldb, int64_t kc, int64_t nc, T* dst);
};

const GemmKernels<float>& gemm_kernels_avx512_f32();
const GemmKernels<float>& gemm_kernels_avx2_f32();

}  // namespace uoe::cpu::detail
