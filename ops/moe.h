// Mixture-of-Experts ops: top-k / top-p routing, group L2 norm, router losses, dropless grouped SwiGLU experts.
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "core/tensor.h"

namespace uoe::ops {

// TopKSoftmax: softmax over the selected scores. FullSoftmax: softmax over all n scores, the selected entries
// taken without renormalisation (AoE's second code path).
enum class RouteWeights { TopKSoftmax, FullSoftmax };

// indices: [T, K] int64 (-1 = empty slot); weights: [T, K] in the scores' dtype (0 in empty slots),
// differentiable w.r.t. the scores (the choice of indices itself has no gradient).
struct Route {
  Tensor indices;
  Tensor weights;
};

// scores: [T, n] float -> the k highest-scoring experts per token, best first (ties: lower index first).
Route topk_route(const Tensor& scores, int64_t k, RouteWeights mode);

// Top-p routing ("Harder Task Needs More Experts"): per token, experts in descending probability
// p_i = softmax(scores)_i until the cumulative probability exceeds p (at least 1, at most max_k); later slots
// are -1 with weight 0. weights = the selected p_i (FullSoftmax) or those renormalised over the selected
// (TopKSoftmax). scores: [T, n], 0 <= p <= 1, 1 <= max_k <= n -> [T, max_k].
Route topp_route(const Tensor& scores, double p, int64_t max_k, RouteWeights mode);

// h: [..., groups*r] -> [..., groups]: L2 norm of each contiguous group of r columns, in norm_dtype (default h's).
// Gradient h / ||h|| (0 where the norm is 0). A bfloat16 h with float32 norms (UoE's routing scores) is read as it
// is: the bits of group_l2norm(h.to(float32)) with no float32 copy of h, its gradient rounded once to bfloat16.
Tensor group_l2norm(const Tensor& h, int64_t groups, std::optional<DType> norm_dtype = std::nullopt);

// Switch-Transformer load balance loss n * sum_i f_i P_i (0-dim): f_i = fraction of the non-empty (token, slot)
// pairs of indices routed to expert i (no gradient), P_i = mean over tokens of probs[:, i]. 1.0 for perfectly
// uniform routing. probs: [T, n] float; indices: [T, K] int (-1 = empty slot; other values outside [0, n) are an
// error on the CPU and left uncounted on a GPU, which counts without waiting for the device).
// Composed of primitive ops, as is the z-loss: no host synchronisation on a GPU.
Tensor load_balance_loss(const Tensor& probs, const Tensor& indices);

// Router z-loss (0-dim): mean over tokens of logsumexp(logits_t)^2. logits: [..., n].
Tensor router_z_loss(const Tensor& logits);

// Expert neurons [r0, r1) of W_gate [n, d_g, D], W_up [n, d, D] and W_down [n, D, d] as weights of their own,
// zero-padded to a multiple of `multiple` neurons: [n, d_g, Rp], [n, d, Rp], [n, Rp, d], Rp = r1 - r0 rounded up.
// A padded neuron adds silu(0)·0 = 0 to every output and its gradients are dropped, so expert_ffn over neurons
// [0, Rp) of them equals expert_ffn over [r0, r1). expert_ffn runs this way on a GPU whenever r0 or r1 - r0 is not
// a multiple of 8 (3b-uoe: [12, 768)): tensor-core GEMMs and cuBLAS's grouped call want 16-byte aligned rows.
std::array<Tensor, 3> padded_neuron_range(const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down, int64_t r0,
                                          int64_t r1, int64_t multiple);

// Dropless grouped SwiGLU over the (token, expert) pairs of indices (slots with -1 skipped):
//   y_t = sum_k weights[t,k] (silu(g_{t,e} W_gate[e][:, r0:r1]) * (x_t W_up[e][:, r0:r1])) W_down[e][r0:r1, :],
//   e = indices[t,k].
// x: [T, d]; indices, weights: [T, K]; W_gate: [n, d_g, D]; W_up: [n, d, D]; W_down: [n, D, d];
// 0 <= r0 <= r1 <= D (UoE runs [r, D)). gate_input undefined: g_{t,e} = x_t (d_g = d); else [T, n, d_g]
// per-expert gate inputs (AoE's factorised gate), or [T, 1, d_g]: one gate input per token shared by the experts
// (expert parallelism sends each pair's own). -> y: [T, d].
// Exact backward for x, weights, gate_input and the three W (only neurons [r0, r1) get gradient).
// Float32 / float64; bf16 / f16 are computed in float32. Deterministic for any OpenMP thread count.
Tensor expert_ffn(const Tensor& x, const Tensor& indices, const Tensor& weights, const Tensor& w_gate,
                  const Tensor& w_up, const Tensor& w_down, int64_t r0, int64_t r1,
                  const Tensor& gate_input = Tensor());

}  // namespace uoe::ops
