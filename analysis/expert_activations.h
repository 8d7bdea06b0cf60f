// The activations of an expert layer's experts computed directly (no routing): what every expert would produce for
// every token, for studies that compare the routing against the experts' own activity.
#pragma once
#include <cstdint>

#include "nn/ffn.h"

namespace uoe::analysis {

// Expert i's SwiGLU activations silu(g_i W_gate[i]) ⊙ (x W_up[i]) over its neurons [lo, hi) (hi < 0: D), where
// g_i = x (AoE: x's factorised-gate projection x W_down[i]): [T, hi − lo]. ffn: MoeFfn, AoeFfn or UoeFfn; x: [T, d].
Tensor expert_activations(const nn::Ffn& ffn, const Tensor& x, int64_t i, int64_t lo = 0, int64_t hi = -1);

// Every expert's activation norm ‖expert_activations(ffn, x, i, lo, hi)‖ per token: [T, n].
Tensor expert_activation_norms(const nn::Ffn& ffn, const Tensor& x, int64_t lo, int64_t hi = -1);

}  // namespace uoe::analysis
