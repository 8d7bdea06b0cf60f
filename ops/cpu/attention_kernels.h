// CPU fused scaled-dot-product attention (FlashAttention-style tiled forward and backward, deterministic).
#pragma once
#include <cstdint>

namespace uoe::cpu {

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

// out = softmax(scale * q k^T + causal mask) v ; lse[b,h,t] = logsumexp of the scaled, masked scores row
// (lse is a contiguous [B,H,T] buffer). q/out have H heads, k/v have Hkv heads.
// Tiled over query and key blocks with an online softmax: the T×T score matrix is never materialised.
// Parallel (OpenMP) over (batch, head, query block); results are bit-identical for any thread count.
template <typename T>
void attention_forward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                       AttnStrides vs, T* out, AttnStrides os, T* lse);

// Given dout (and out, lse saved by attention_forward), writes dq, dk, dv (written, not accumulated;
// dk/dv have Hkv heads and sum over the q heads of their group). Probabilities are recomputed from q, k, lse.
// Two parallel passes — (batch, kv head, key block) for dk/dv, (batch, head, query block) for dq — so every
// output element is produced by one thread in a fixed order: bit-identical for any thread count.
template <typename T>
void attention_backward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                        AttnStrides vs, const T* out, AttnStrides os, const T* lse, const T* dout, AttnStrides dos,
                        T* dq, AttnStrides dqs, T* dk, AttnStrides dks, T* dv, AttnStrides dvs);

// Testing hook: caps the instruction set the kernels may use (4: x86-64-v4 / AVX-512, 3: x86-64-v3 / AVX2,
// 1: baseline); 0 restores automatic selection. Returns the level that calls will now use. Call it only while no
// attention kernel is running. Every level gives results within rounding of the others, deterministic per level.
int attention_set_isa_level(int level);

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

}  // namespace uoe::cpu
