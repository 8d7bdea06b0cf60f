// uoe::cuda fused attention: FlashAttention-2 style tiled kernels mirroring ops/cpu/attention_kernels.h, plus a
// bfloat16 path (tensor cores for head dims 64 and 128).
#pragma once
#include <cstdint>
#include <initializer_list>

#include "core/half.h"
#include "ops/cpu/attention_kernels.h"

// Semantics, shapes and strides exactly as uoe::cpu::attention_forward / attention_backward (lse: contiguous
// [B, H, T]). Pointers are device pointers on the current device; work goes to cuda::current_stream and the
// calls return before it finishes. Deterministic: every output element is produced by one thread block in a
// fixed order (no atomics; dq has its own pass). Scratch (the row sums D = rowsum(dout ⊙ out) of the backward)
// comes from the library's CUDA allocator.
//
// Kernels: one block per (batch, head, query tile) for the forward and dq, one per (batch, kv head, key tile)
// for dk/dv; K/V (or Q/dO) tiles through shared memory, online softmax, never a T×T matrix.
//  * float / double: scalar FMA kernels, compute in T, any head dim that fits shared memory (tiles of 64, 32 or
//    16 rows chosen by the head dim).
//  * bfloat16: mma.sync m16n8k16 (bf16 operands, float32 accumulation and softmax) when Dh is 64, 96 or 128
//    and every pointer and stride is 16-byte aligned; otherwise the float32-compute scalar kernels on bf16
//    storage, and each such call is counted as a slow path (core/slow_paths.h: attention_bf16_scalar.head_dim
//    or .misaligned).
namespace uoe::cuda {

using cpu::AttnShape;
using cpu::AttnStrides;

template <typename T>
void attention_forward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                       AttnStrides vs, T* out, AttnStrides os, T* lse);
template <typename T>
void attention_backward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                        AttnStrides vs, const T* out, AttnStrides os, const T* lse, const T* dout, AttnStrides dos,
                        T* dq, AttnStrides dqs, T* dk, AttnStrides dks, T* dv, AttnStrides dvs);

// bfloat16 q, k, v, out, dout and gradients; lse float32 (natural log, as above).
void attention_forward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                            const BFloat16* v, AttnStrides vs, BFloat16* out, AttnStrides os, float* lse);
void attention_backward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                             const BFloat16* v, AttnStrides vs, const BFloat16* out, AttnStrides os, const float* lse,
                             const BFloat16* dout, AttnStrides dos, BFloat16* dq, AttnStrides dqs, BFloat16* dk,
                             AttnStrides dks, BFloat16* dv, AttnStrides dvs);
// Whether the bf16 calls with these arguments take the tensor-core kernels (Dh 64, 96 or 128, 16-byte aligned).
bool attention_bf16_uses_tensor_cores(const AttnShape& s, std::initializer_list<const void*> ptrs,
                                      std::initializer_list<AttnStrides> strides);

extern template void attention_forward<float>(const AttnShape&, const float*, AttnStrides, const float*, AttnStrides,
                                              const float*, AttnStrides, float*, AttnStrides, float*);
extern template void attention_forward<double>(const AttnShape&, const double*, AttnStrides, const double*, AttnStrides,
                                               const double*, AttnStrides, double*, AttnStrides, double*);
extern template void attention_backward<float>(const AttnShape&, const float*, AttnStrides, const float*, AttnStrides,
                                               const float*, AttnStrides, const float*, AttnStrides, const float*,
                                               const float*, AttnStrides, float*, AttnStrides, float*, AttnStrides,
                                               float*, AttnStrides);
extern template void attention_backward<double>(const AttnShape&, const double*, AttnStrides, const double*,
                                                AttnStrides, const double*, AttnStrides, const double*, AttnStrides,
                                                const double*, const double*, AttnStrides, double*, AttnStrides,
                                                double*, AttnStrides, double*, AttnStrides);

namespace detail {
// The head dims the tensor-core kernels are built for: 64 and 128, and 96 (d_model 1536 with 16 heads, 3b-*).
inline bool mma_head_dim(int64_t Dh) { return Dh == 64 || Dh == 96 || Dh == 128; }
// The forward tensor-core kernel's rows per warp: 16 x m_tiles (1: 64-query tiles, Q fragments in registers; 2, the
// default: 128-query tiles, each K/V fragment feeds two MMAs). Process-wide; for benchmarks and parity tests.
void set_attention_forward_m_tiles(int m_tiles);
int attention_forward_m_tiles();
// Tensor-core bf16 kernels (cuda/attention_mma_forward.cu, cuda/attention_mma_backward.cu); raw bf16 bits,
// preconditions checked by the callers above. dsum: contiguous [B, H, T] float, rowsum(dout ⊙ out).
void attention_forward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                           const uint16_t* v, AttnStrides vs, uint16_t* out, AttnStrides os, float* lse);
void attention_backward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                            const uint16_t* v, AttnStrides vs, const float* lse, const float* dsum,
                            const uint16_t* dout, AttnStrides dos, uint16_t* dq, AttnStrides dqs, uint16_t* dk,
                            AttnStrides dks, uint16_t* dv, AttnStrides dvs);
}  // namespace detail

}  // namespace uoe::cuda
