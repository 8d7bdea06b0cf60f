// The four interchangeable FFN kinds (dense, MoE, AoE, UoE) behind one interface.
#pragma once
#include <memory>
#include <vector>

#include "core/communicator.h"
#include "nn/config.h"
#include "nn/layers.h"
#include "ops/moe.h"

namespace uoe::nn {

// How a forward pass routed: the load of each expert and the Switch balance.
struct RoutingSummary {
  std::vector<double> load;  // [n] fraction of the (token, slot) pairs routed to each expert
  double balance = 0;        // n Σ_i f_i P_i (P_i the mean probability of expert i): 1.0 means perfectly balanced
};

// What an FFN's forward returns.
struct FfnOut {
  Tensor y;    // [T, d]
  Tensor aux;  // scalar auxiliary loss, added to the training loss (undefined when none)
};

// total + term, or term alone while total is undefined: auxiliary losses summed in the order they arise.
Tensor add_loss(const Tensor& total, const Tensor& term);

// How the last forward of an FFN layer routed (detached, no graph). The routing statistics are computed when read
// (two copies to the host), so that a training step on a GPU never waits for them.
struct FfnStats {
  Tensor probs;    // [T, n] routing probabilities; undefined for a dense FFN
  Tensor indices;  // [T, K] the experts each token went to (-1 = empty slot); undefined for a dense FFN
  bool routed() const { return indices.defined(); }
  RoutingSummary routing() const;
};

// What the last forward routed, kept (detached) while `Ffn::record` is set: the input of analysis tools.
struct RoutingTrace {
  Tensor input;      // [T, d] the FFN input
  Tensor scores;     // [T, n] routing scores (MoE: router logits; AoE, UoE: activation norms), float32/64
  ops::Route route;  // indices [T, K] (-1 = empty slot), weights [T, K]
};

// Expert weights of n SwiGLU experts: W_gate [n, d_gate, D], W_up [n, d, D], W_down [n, D, d].
struct ExpertWeights {
  Tensor gate, up, down;
  ExpertWeights to(DType dt) const { return {gate.to(dt), up.to(dt), down.to(dt)}; }  // no-op casts are free
};

class Ffn : public Module {
 public:
  virtual FfnOut forward(const Tensor& x) = 0;  // x: [T, d] -> y [T, d] and aux; updates `stats` (and `trace`)
  FfnStats stats;
  bool record = false;  // keep `trace` of every forward (expert kinds only)
  RoutingTrace trace;
  // Expert parallelism (expert kinds): keeps only this rank's n/E experts of W_gate, W_up and W_down (rows
  // [rank·n/E, (rank+1)·n/E), E = group.size()); each forward then sends the tokens routed to other ranks' experts
  // there and back (nn/expert_parallel.h). The routing stays replicated; UoE gathers every expert's routing
  // neurons [0, r) from their owners. Every rank of `group` must run the same forwards and backwards.
  void shard_experts(Communicator& group);
  // The expert weights (null for a dense FFN): full, or this rank's slices once sharded.
  virtual ExpertWeights* experts() { return nullptr; }

 protected:
  // The routing tail the expert kinds share: tokens to experts by their scores [T, n] (top-k, or top-p; weights by
  // cfg.weights), the routing statistics (`stats`, `trace`) and the auxiliary loss on P = softmax(scores): load
  // balance times cfg.aux_loss, plus top-p's entropy regulariser 1e-4 (undefined when neither). x: [T, d].
  struct Routed {
    ops::Route route;
    Tensor aux;
  };
  Routed route_tokens(const Tensor& x, const Tensor& scores, const FfnConfig& cfg);
  // All n experts' routing parts, W_gate[:, :, :r], W_up[:, :, :r], W_down[:, :r, :], from weights `w` in the
  // compute dtype: slices of w, or gathered from the ranks of the expert group (gradients flow to the owners).
  ExpertWeights routing_parts(const ExpertWeights& w, int64_t r) const;
  // ops::expert_ffn, or expert_parallel_ffn across the expert group once sharded.
  // indices, weights: [T, K]; w in the compute dtype of x.
  Tensor run_experts(const Tensor& x, const Tensor& indices, const Tensor& weights, const ExpertWeights& w, int64_t r0,
                     int64_t r1, const Tensor& gate_input = Tensor()) const;

 private:
  Communicator* expert_group_ = nullptr;
};

std::shared_ptr<Ffn> make_ffn(const ModelConfig& c, double out_std);

// Routers, scores and their softmax run in float32 (float64 stays float64, for gradient checks).
inline DType router_dtype(DType x) { return x == DType::Float64 ? x : DType::Float32; }

class DenseFfn : public Ffn {
 public:
  DenseFfn(int64_t d, int64_t hidden, double out_std);
  FfnOut forward(const Tensor& x) override;
  std::shared_ptr<SwiGLU> mlp;
};

ExpertWeights make_experts(Module& m, int64_t n, int64_t d_gate, int64_t d, int64_t D, double out_std);

// Linear router (f32), top-K (or top-p) softmax over the selected logits, optional shared expert,
// Switch load-balance loss and router z-loss, dropless experts.
class MoeFfn : public Ffn {
 public:
  MoeFfn(const ModelConfig& c, double out_std);
  FfnOut forward(const Tensor& x) override;
  FfnConfig cfg;
  Tensor router;  // [d, n]
  ExpertWeights w;
  std::shared_ptr<SwiGLU> shared;
  ExpertWeights* experts() override { return &w; }
};

// Autonomy-of-Experts: factorised gate W_gate[i] = W_down[i] W_up[i] of rank d_low; experts
// rank themselves by ‖x W_down[i]‖ and the selected ones finish the computation; optional shared
// expert (as the AoE authors' code has), added like MoE's.
class AoeFfn : public Ffn {
 public:
  AoeFfn(const ModelConfig& c, double out_std);
  FfnOut forward(const Tensor& x) override;
  FfnConfig cfg;
  Tensor gate_down;  // [d, n * d_low]: all experts' W_down side by side
  ExpertWeights w;   // w.gate: [n, d_low, D] (the W_up of the factorised gate)
  std::shared_ptr<SwiGLU> shared;  // width shared_width; null when 0
  ExpertWeights* experts() override { return &w; }
};

// Union-of-Experts: routing neurons [0, r) of every expert run densely, their activation
// norms select the experts, their outputs form the virtual shared expert; the selected
// experts run neurons [r, D). Every switch of docs/UOE.md.
class UoeFfn : public Ffn {
 public:
  UoeFfn(const ModelConfig& c, double out_std);
  FfnOut forward(const Tensor& x) override;
  FfnConfig cfg;
  ExpertWeights w;  // [n, d, D], [n, d, D], [n, D, d]
  ExpertWeights* experts() override { return &w; }
  // Gradient probes (analysis/gradient_paths.h): when set, run on the gradient reaching the routing
  // activations through the virtual shared expert (vse: dL/dH) and through the routing scores
  // (score: dL/d(score source)), each on its own alias of the tensor.
  GradHook vse_grad_hook, score_grad_hook;
};

// UoE's dense routing part: every token through neurons [0, r) of every expert.
struct RoutingActivations {
  Tensor g;       // [T, n·r] x Ŵ_g^R
  Tensor h;       // [T, n·r] H = silu(g) ⊙ (x Ŵ_p^R)
  Tensor source;  // the one of h, silu(g), g the score is the group norm of (FfnConfig::score)
};
// x: [T, d]; w_gate, w_up: [n, d, D >= r] (only [0, r) is read).
RoutingActivations routing_activations(const Tensor& x, const Tensor& w_gate, const Tensor& w_up, int64_t r,
                                       ScoreSource score);

}  // namespace uoe::nn
