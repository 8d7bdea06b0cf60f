// The attention kernel family, one declaration list for both backends: fused scaled-dot-product attention
// (FlashAttention-style tiled forward and backward, deterministic), on float, double and bfloat16. Implemented in
// ops/cpu/attention_kernels.cpp and ops/cpu/attention_bf16.cpp (host pointers) and cuda/attention_kernels.cu
// (device pointers on the current device, work on cuda::current_stream, asynchronous); a build without CUDA links
// stubs that raise (cuda/stub/). Callers pick the backend with UOE_KERNEL (ops/backend.h).
//
// Both backends tile over query and key blocks with an online softmax (the T×T score matrix is never
// materialised) and produce every output element in one thread (block) in a fixed order: bit-identical for any
// thread count, no atomics. CPU: OpenMP over (batch, head, query block), and for the backward two passes, (batch,
// kv head, key block) for dk/dv and (batch, head, query block) for dq. GPU: one block per (batch, head, query tile)
// for the forward and dq, one per (batch, kv head, key tile) for dk/dv; float / double in scalar FMA kernels, any
// head dim that fits shared memory. The backward's scratch (the GPU's row sums D = rowsum(dout ⊙ out)) comes from
// the library's allocator.
#pragma once
#include <cstdint>
#include <initializer_list>

#include "core/half.h"

namespace uoe::kernels {

// Element strides of a [B, H, T, Dh] tensor whose last (head-dim) axis is contiguous.
// E.g. a contiguous [B,H,T,Dh] tensor has {H*T*Dh, T*Dh, Dh}; a [B,T,H,Dh] buffer viewed as [B,H,T,Dh] has
// {T*H*Dh, Dh, H*Dh}.
struct AttnStrides {
  int64_t batch, head, time;
};

// H % Hkv == 0 (grouped-query: q head h uses kv head h / (H/Hkv)). scale multiplies q·k (usually 1/sqrt(Dh)).
// causal: query t attends to keys 0..t only.
struct AttnShape {
  int64_t B, H, Hkv, T, Dh;
  double scale;
  bool causal;
};

}  // namespace uoe::kernels

#define UOE_ATTENTION_EXTERN(T)                                                                                    \
  extern template void attention_forward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*, \
                                            AttnStrides, T*, AttnStrides, T*);                                       \
  extern template void attention_backward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides,         \
                                             const T*, AttnStrides, const T*, AttnStrides, const T*, const T*,       \
                                             AttnStrides, T*, AttnStrides, T*, AttnStrides, T*, AttnStrides);

// The family's declarations, the same in both backends' namespaces (T = float, double; and bfloat16).
#define UOE_ATTENTION_KERNELS                                                                                      \
  using kernels::AttnShape;                                                                                        \
  using kernels::AttnStrides;                                                                                      \
  /* out = softmax(scale * q k^T + causal mask) v ; lse[b,h,t] = logsumexp of the scaled, masked scores row (lse   \
     is a contiguous [B,H,T] buffer). q/out have H heads, k/v have Hkv heads. */                                   \
  template <typename T>                                                                                            \
  void attention_forward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,   \
                         AttnStrides vs, T* out, AttnStrides os, T* lse);                                          \
  /* Given dout (and out, lse saved by attention_forward), writes dq, dk, dv (written, not accumulated; dk/dv have \
     Hkv heads and sum over the q heads of their group). Probabilities are recomputed from q, k, lse. */           \
  template <typename T>                                                                                            \
  void attention_backward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,  \
                          AttnStrides vs, const T* out, AttnStrides os, const T* lse, const T* dout,               \
                          AttnStrides dos, T* dq, AttnStrides dqs, T* dk, AttnStrides dks, T* dv, AttnStrides dvs); \
  /* bfloat16 q, k, v, out, dout and gradients; lse float32 (natural log, as above), softmax in float32. */       \
  void attention_forward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k,            \
                              AttnStrides ks, const BFloat16* v, AttnStrides vs, BFloat16* out, AttnStrides os,    \
                              float* lse);                                                                         \
  void attention_backward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k,           \
                               AttnStrides ks, const BFloat16* v, AttnStrides vs, const BFloat16* out,             \
                               AttnStrides os, const float* lse, const BFloat16* dout, AttnStrides dos,            \
                               BFloat16* dq, AttnStrides dqs, BFloat16* dk, AttnStrides dks, BFloat16* dv,         \
                               AttnStrides dvs);                                                                   \
  UOE_ATTENTION_EXTERN(float)                                                                                      \
  UOE_ATTENTION_EXTERN(double)

namespace uoe::cpu {
UOE_ATTENTION_KERNELS

// Testing hook: caps the instruction set the kernels may use (4: x86-64-v4 / AVX-512, 3: x86-64-v3 / AVX2,
// 1: baseline); 0 restores automatic selection. Returns the level that calls will now use. Call it only while no
// attention kernel is running. Every level gives results within rounding of the others, deterministic per level.
int attention_set_isa_level(int level);

// The bf16 kernels read bfloat16 tiles directly: QKᵀ, PV and the backward's products are VDPBF16PS on bfloat16
// pairs with float32 sums (probabilities and dS rounded to bfloat16 for their products, as on the GPU), the online
// softmax runs in float32, and out, dq, dk, dv are summed in float32 and rounded once. Where the CPU lacks
// AVX512-BF16, or the bfloat16 GEMM path is pinned to f32 (UOE_PIN_ISA, ops/cpu/gemm_isa.h), they run the float
// kernels on the bfloat16 tensors: tiles widened as they are packed, results rounded once (the float kernels' bits
// on the widened tensors, rounded; no float32 copy of a tensor). The path they take now: "avx512_bf16" or "f32".
const char* attention_bf16_path();
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_ATTENTION_KERNELS

// The bf16 kernels: mma.sync m16n8k16 (bf16 operands, float32 accumulation and softmax) when Dh is 64, 96 or 128
// and every pointer and stride is 16-byte aligned; otherwise the float32-compute scalar kernels on bf16 storage,
// and each such call is counted as a slow path (core/slow_paths.h: attention_bf16_scalar.head_dim or .misaligned).
// Whether the bf16 calls with these arguments take the tensor-core kernels (Dh 64, 96 or 128, 16-byte aligned).
bool attention_bf16_uses_tensor_cores(const AttnShape& s, std::initializer_list<const void*> ptrs,
                                      std::initializer_list<AttnStrides> strides);
}  // namespace uoe::cuda

#undef UOE_ATTENTION_KERNELS
#undef UOE_ATTENTION_EXTERN
