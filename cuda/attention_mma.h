// The GPU attention's tensor-core internals (the family's interface is ops/kernels/attention.h): the bf16
// mma.sync kernels of cuda/attention_mma_forward.cuh and cuda/attention_mma_backward.cuh, and their tile settings,
// process-wide switches for benchmarks and parity tests.
#pragma once
#include <cstdint>

#include "ops/kernels/attention.h"

namespace uoe::cuda::detail {

// The head dims the tensor-core kernels are built for: 64 and 128, and 96 (d_model 1536 with 16 heads, 3b-*).
inline bool mma_head_dim(int64_t Dh) { return Dh == 64 || Dh == 96 || Dh == 128; }
// The forward tensor-core kernel's rows per warp: 16 x m_tiles (1: 64-query tiles, Q fragments in registers; 2, the
// default: 128-query tiles, each K/V fragment feeds two MMAs). Process-wide; for benchmarks and parity tests.
void set_attention_forward_m_tiles(int m_tiles);
int attention_forward_m_tiles();
// Which block takes which (head, tile) task, in all three kernels: tiles inner (the default: a head's tiles run side by
// side and stream its K and V, or Q and dO, through L2 together) or heads inner (every head's heaviest tile, then
// every head's next one: the order before 2026-12-07, when each resident block streamed a different head's K and V
// from memory). Heaviest tile first either way. Process-wide; for benchmarks and parity tests.
void set_attention_tiles_inner(bool tiles_inner);
bool attention_tiles_inner();
// Tensor-core bf16 kernels; raw bf16 bits, preconditions checked by the callers (cuda::attention_forward_bf16,
// attention_backward_bf16). dsum: contiguous [B, H, T] float, rowsum(dout ⊙ out).
void attention_forward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                           const uint16_t* v, AttnStrides vs, uint16_t* out, AttnStrides os, float* lse);
void attention_backward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                            const uint16_t* v, AttnStrides vs, const float* lse, const float* dsum,
                            const uint16_t* dout, AttnStrides dos, uint16_t* dq, AttnStrides dqs, uint16_t* dk,
                            AttnStrides dks, uint16_t* dv, AttnStrides dvs);

}  // namespace uoe::cuda::detail
