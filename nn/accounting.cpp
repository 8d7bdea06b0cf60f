// Parameter, FLOP and training-memory accounting from a configuration.
#include "nn/accounting.h"

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/error.h"

namespace uoe::nn {
namespace {

// FFN parameters of one layer: all, and those one token uses.
std::pair<double, double> ffn_params(const ModelConfig& c) {
  const FfnConfig& f = c.ffn;
  const double d = double(c.d_model), n = double(f.n_experts), K = double(f.top_k), D = double(f.expert_width);
  switch (f.kind) {
    case FfnKind::Dense: return {3 * d * double(f.hidden), 3 * d * double(f.hidden)};
    case FfnKind::MoE: {
      const double shared = 3 * d * double(f.shared_width);
      return {d * n + n * 3 * d * D + shared, d * n + K * 3 * d * D + shared};
    }
    case FfnKind::AoE: {
      const double low = double(f.d_low), shared = 3 * d * double(f.shared_width);
      return {d * n * low + n * (low * D + 2 * d * D) + shared, d * n * low + K * (low * D + 2 * d * D) + shared};
    }
    case FfnKind::UoE: {
      // the virtual shared expert (every expert's r routing neurons), then the selected experts' other neurons;
      // with combine = full_expert the selected experts run all D neurons again (nn/uoe_ffn.cpp)
      const double r = double(f.routing_neurons), rest = f.combine == Combine::FullExpert ? D : D - r;
      return {n * 3 * d * D, 3 * d * n * r + K * 3 * d * rest};
    }
  }
  return {0, 0};
}

// ---- training memory ---------------------------------------------------------------------------------------
// Every term follows what the forward code keeps for backward (nn/transformer.cpp, nn/attention.cpp,
// nn/layers.cpp, nn/ffn.cpp, nn/moe_ffn.cpp, nn/uoe_ffn.cpp and the saves of the ops' backward nodes) and what
// the backward allocates. CPU kernels compute reduced floats in float32, so with bfloat16 compute group_l2norm
// keeps float32 copies of its inputs; matmul, expert_ffn and attention run bfloat16 products on their inputs as
// they are, the loss reads bfloat16 logits as they are, and the elementwise ops, sums and index sums compute in
// float32 registers on them.

constexpr double kF32 = 4, kI64 = 8;

// Bytes the CPU allocator hands out for `numel` elements of `size` bytes: 64-byte blocks, 4 KiB pages from 64 KiB.
double tensor_bytes(double numel, double size) {
  const double bytes = numel * size, unit = bytes >= 65536 ? 4096 : 64;
  return std::ceil(bytes / unit) * unit;
}

// The shape of one step.
struct Step {
  double N;     // tokens of this process: batch × seq
  double p;     // bytes per element of the storage dtype: parameters and gradients (the residual stream is float32)
  double c;     // bytes per element of the compute dtype
  bool f32;     // compute in float32: no working copies
  bool mixed;   // compute dtype != storage dtype: weights are cast as the layers use them
  bool cast_experts;  // the layer casts the expert weights to the compute dtype, and expert_ffn keeps the casts
  double ep;    // expert parallelism: this rank keeps n / ep experts of every layer
  double act(double cols, double size) const { return tensor_bytes(N * cols, size); }  // one [N, cols] tensor
  // Expert parallelism keeps, per layer (nn/expert_parallel.cpp): the expert results sent back to this rank,
  // [N·K, d] in the compute dtype, for the routing weights' product; the pairs it received, which expert_ffn
  // keeps [N·K, d] (with AoE's gate inputs [N·K, d_gate]), in the compute dtype too.
  double exchange(double K, double d, double d_gate = 0) const {
    if (ep <= 1) return 0;
    return 2 * act(K * d, c) + (d_gate > 0 ? act(K * d_gate, c) : 0);
  }
};

// One part of the model: what its forward keeps for backward and what its backward needs on top.
struct Part {
  double saved = 0;   // activations kept for backward
  double copies = 0;  // weight copies kept for backward
  double grads = 0;   // gradients of its parameters
  double work = 0;    // the largest working set of its backward beyond saved + copies (released saves subtracted)
};

// The three expert weight tensors, in elements.
struct Experts {
  double gate, up, down;
  double bytes(double size) const {
    return tensor_bytes(gate, size) + tensor_bytes(up, size) + tensor_bytes(down, size);
  }
  double largest(double size) const { return tensor_bytes(std::max({gate, up, down}), size); }
};

// One layer's expert weights on this rank (none for a dense FFN): W_gate [n, d_gate, D], W_up [n, d, D],
// W_down [n, D, d] for the rank's n / ep experts.
Experts layer_experts(const ModelConfig& m, double ep) {
  const FfnConfig& f = m.ffn;
  if (f.kind == FfnKind::Dense) return {0, 0, 0};
  const double d = double(m.d_model), n = double(f.n_experts) / ep, D = double(f.expert_width);
  const double d_gate = f.kind == FfnKind::AoE ? double(f.d_low) : d;
  return {n * d_gate * D, n * d * D, n * D * d};
}

// Elements of the largest parameter on this rank: the embedding (or head) [V, d], an attention projection
// [d, d] or an FFN weight.
double largest_parameter(const ModelConfig& m, double ep) {
  const FfnConfig& f = m.ffn;
  const double d = double(m.d_model), n = double(f.n_experts);
  const Experts e = layer_experts(m, ep);
  double ffn = std::max({e.gate, e.up, e.down});
  switch (f.kind) {
    case FfnKind::Dense: ffn = d * double(f.hidden); break;
    case FfnKind::MoE: ffn = std::max({ffn, d * n, d * double(f.shared_width)}); break;  // and the router
    case FfnKind::AoE: ffn = std::max({ffn, d * n * double(f.d_low), d * double(f.shared_width)}); break;  // gate
    case FfnKind::UoE: break;
  }
  return std::max({double(m.vocab_size) * d, d * d, ffn});
}

// Norms, attention and the residual stream of one block (nn/transformer.cpp Block::forward, nn/attention.cpp).
Part attention_part(const ModelConfig& m, const Step& s) {
  const double d = double(m.d_model), H = double(m.n_heads), kv = double(m.n_kv_heads) * d / H;
  Part a;
  a.saved = 2 * s.act(d, kF32)                           // residual: block input and h = x + attn [N, d] (norms)
            + 2 * s.act(1, kF32)                         // rms_norm: 1/rms [N], twice
            + s.act(d, s.c)                              // attention input: normed, in the compute dtype [N, d]
            + s.act(d, s.c) + 2 * s.act(kv, s.c)         // attention: q, k, v after RoPE [N, d], [N, kv]
            + s.act(d, s.c) + s.act(H, kF32);            // attention: output (wo's input) [N, d], log-sum-exp [N, H]
  const double wq = d * d, wk = d * kv;
  a.copies = s.mixed ? 2 * tensor_bytes(wq, s.c) + 2 * tensor_bytes(wk, s.c) : 0;  // wq, wk, wv, wo cast
  a.grads = 2 * tensor_bytes(wq, s.p) + 2 * tensor_bytes(wk, s.p) + 2 * tensor_bytes(d, s.p);  // and 2 norms
  // backward: gradient of wo's input [N, d], then dq, dk, dv [N, d + 2 kv], all in the compute dtype
  a.work = 2 * s.act(d, s.c) + 2 * s.act(kv, s.c);
  return a;
}

// SwiGLU of width h (nn/layers.cpp): gate g, up u and the product m = swiglu(g, u) [N, h] kept.
Part swiglu_part(double d, double h, const Step& s) {
  Part f;
  f.saved = 3 * s.act(h, s.c);
  f.copies = s.mixed ? 3 * tensor_bytes(d * h, s.c) : 0;
  f.grads = 3 * tensor_bytes(d * h, s.p);
  // swiglu's backward: dm, then dg and du [N, h] while m is released (the kernels read bfloat16 as it is)
  f.work = 2 * s.act(h, s.c);
  return f;
}

// topk_route / topp_route: indices [N, K] int64 and weights [N, K] (float32), probabilities [N, n] for
// full_softmax; expert_ffn's copy of the weights cast to a reduced compute dtype.
double route_saved(const Step& s, double K, double n, bool full_softmax) {
  return s.act(K, kI64) + s.act(K, kF32) + (full_softmax ? s.act(n, kF32) : 0) + (s.f32 ? 0 : s.act(K, s.c));
}

// The (token, slot) pairs per token that routing makes room for: top_k, or all n with routing = topp.
double routed_slots(const FfnConfig& f) {
  return f.routing == Routing::TopP ? double(f.n_experts) : double(f.top_k);
}

// The routing probabilities route_tokens keeps: softmax [N, n] for the balance loss or top-p's entropy, and
// log_softmax [N, n] for the entropy.
double probs_saved(const Step& s, const FfnConfig& f) {
  const double n = double(f.n_experts);
  const bool topp = f.routing == Routing::TopP;
  return (f.aux_loss > 0 || topp ? s.act(n, kF32) : 0) + (topp ? s.act(n, kF32) : 0);
}

// A routed part with an optional shared SwiGLU expert run after it in the forward: the shared expert's backward
// first, then the routed part's (the shared expert's saves released, its gradients made).
Part with_shared(Part routed, double d, double width, const Step& s) {
  if (width <= 0) return routed;
  const Part shared = swiglu_part(d, width, s);
  routed.work = std::max(shared.work, shared.grads - shared.saved - shared.copies + routed.work);
  routed.saved += shared.saved;
  routed.copies += shared.copies;
  routed.grads += shared.grads;
  return routed;
}

// The (token, slot) pairs per token that expert_ffn runs: top_k; with routing = topp as many as a uniform router
// needs to pass top_p (the most a token takes while the router is untrained).
double run_slots(const FfnConfig& f) {
  const double n = double(f.n_experts);
  return f.routing == Routing::TopP ? std::min(n, std::floor(f.top_p * n) + 1) : double(f.top_k);
}

// expert_ffn's H_g and H_p [pairs, R] each, kept in the compute dtype for its backward (R neurons per pair).
double expert_kept(const Step& s, const FfnConfig& f, double R) { return s.act(2 * run_slots(f) * R, s.c); }

// expert_ffn's backward as it returns, all in the compute dtype: dx [N, d], d weights [N, K], the gate input's
// gradient [N, gate_cols] and the raw gradients of the three expert weights.
double expert_backward(const Step& s, double d, double K, double gate_cols, const Experts& e) {
  return s.act(d, s.c) + s.act(K, s.c) + s.act(gate_cols, s.c) + e.bytes(s.c);
}

// After expert_ffn's backward in float32: the first raw gradient, cast to the storage dtype when that differs,
// copied into .grad.
double first_expert_grad(const Step& s, const Experts& e) {
  return s.f32 ? e.largest(s.p) * (s.mixed ? 2 : 1) : 0;
}

// MoE (nn/moe_ffn.cpp): float32 router, top-K (or top-p) routing, dropless experts, optional shared SwiGLU.
Part moe_part(const ModelConfig& m, const Step& s) {
  const FfnConfig& f = m.ffn;
  const double d = double(m.d_model), n = double(f.n_experts), K = routed_slots(f);
  const Experts e = layer_experts(m, s.ep);
  Part p;
  p.saved = (s.f32 ? 0 : s.act(d, kF32))                              // router input x in float32 [N, d]
            + route_saved(s, K, n, false)                              // routing
            + probs_saved(s, f)                                        // balance loss, top-p entropy
            + (f.z_loss > 0 ? s.act(n, kF32) + s.act(1, kF32) : 0)     // z-loss: logits [N, n], log-sum-exp [N]
            + expert_kept(s, f, double(f.expert_width))                // expert_ffn's H_g, H_p
            + s.exchange(K, d);
  p.copies = (s.cast_experts ? e.bytes(s.c) : 0)                      // the experts cast, kept by expert_ffn
             + (s.p == kF32 ? 0 : tensor_bytes(d * n, kF32));       // the router cast to float32
  p.grads = tensor_bytes(d * n, s.p) + e.bytes(s.p);
  // backward: expert_ffn's, whose raw weight gradients go into .grad one at a time
  p.work = expert_backward(s, d, K, 0, e) + first_expert_grad(s, e);
  return with_shared(p, d, double(f.shared_width), s);
}

// AoE (nn/aoe_ffn.cpp): low-rank gate c = x W_down [N, n·d_low] whose group norms rank the experts, optional
// shared SwiGLU.
Part aoe_part(const ModelConfig& m, const Step& s) {
  const FfnConfig& f = m.ffn;
  const double d = double(m.d_model), n = double(f.n_experts), K = routed_slots(f),
               low = double(f.n_experts * f.d_low);
  const Experts e = layer_experts(m, s.ep);
  Part p;
  p.saved = s.act(low, kF32)                                // c in float32: group_l2norm's input
            + (s.f32 || s.ep > 1 ? 0 : s.act(low, s.c))   // c in the compute dtype: expert_ffn's gate input
            + s.act(n, kF32)                              // scores [N, n]
            + route_saved(s, K, n, f.weights == ops::RouteWeights::FullSoftmax)
            + probs_saved(s, f)                           // balance loss, top-p entropy
            + expert_kept(s, f, double(f.expert_width))   // expert_ffn's H_g, H_p
            + s.exchange(K, d, double(f.d_low));
  p.copies = (s.mixed ? tensor_bytes(d * low, s.c) : 0) + (s.cast_experts ? e.bytes(s.c) : 0);
  p.grads = tensor_bytes(d * low, s.p) + e.bytes(s.p);
  // backward: expert_ffn's (the first raw gradient copied into .grad); then c's two gradients (the gate input's
  // in the compute dtype, the scores' in float32) while c is released, expert_ffn's dx [N, d] waiting, the expert
  // gradients made
  p.work = std::max(expert_backward(s, d, K, low, e) + first_expert_grad(s, e),
                    s.act(d, s.c) + s.act(low, kF32) + s.act(low, s.c) + e.bytes(s.p));
  return with_shared(p, d, double(f.shared_width), s);
}

// UoE (nn/uoe_ffn.cpp): routing neurons [0, r) of all n experts run densely (H [N, n·r]), their group norms
// route, the selected experts run neurons [r, D).
Part uoe_part(const ModelConfig& m, const Step& s) {
  const FfnConfig& f = m.ffn;
  const double d = double(m.d_model), n = double(f.n_experts);
  const double nr = n * double(f.routing_neurons), K = routed_slots(f);
  // the neurons expert_ffn runs per pair: [r, D), or all D with combine = full_expert
  const double expert_neurons =
      double(f.expert_width) - (f.combine == Combine::FullExpert ? 0.0 : double(f.routing_neurons));
  const Experts e = layer_experts(m, s.ep);  // (the routing slices of all n experts are gathered)
  Part p;
  const double gate_silu = f.score == ScoreSource::GateSilu ? 1 : 0;  // silu(g), the score's source, kept by silu
  p.saved = (3 + gate_silu) * s.act(nr, s.c)               // g, up, H = swiglu(g, up) [N, n·r]
            + (s.f32 ? 0 : s.act(nr, kF32))                // the score's source in float32 [N, n·r]
            + s.act(n, kF32)                               // scores [N, n]
            + route_saved(s, K, n, f.weights == ops::RouteWeights::FullSoftmax)
            + (f.combine == Combine::FullExpert ? 2 * s.act(nr, s.c) : 0)  // unselected mask and masked H [N, n·r]
            + probs_saved(s, f)                            // balance loss, top-p entropy
            + expert_kept(s, f, expert_neurons)            // expert_ffn's H_g, H_p
            + s.exchange(K, d);
  // the routing slices of W_gate, W_up [d, n·r] and W_down [n·r, d] are copied by their reshapes
  p.copies = 3 * tensor_bytes(d * nr, s.c) + (s.cast_experts ? e.bytes(s.c) : 0);
  p.grads = e.bytes(s.p);
  // backward: expert_ffn's while dH [N, n·r] from the virtual shared expert waits; then the scores' gradient of
  // their source [N, n·r] (float32) beside expert_ffn's results in the compute dtype. The expert weights' gradients
  // wait for those of the routing slices, scattered into a zero [n, d, D] and summed with them once the activations
  // are released.
  const double dH = s.act(nr, s.c);
  const double scores = dH + s.act(d, s.c) + s.act(K, s.c) + e.bytes(s.c) + s.act(nr, kF32);
  p.work = std::max({dH + expert_backward(s, d, K, 0, e), scores,
                     e.bytes(s.c) + 2 * e.largest(s.c) - p.saved - p.copies});
  return p;
}

Part ffn_part(const ModelConfig& m, const Step& s) {
  const double d = double(m.d_model);
  Part f;
  switch (m.ffn.kind) {
    case FfnKind::Dense: f = swiglu_part(d, double(m.ffn.hidden), s); break;
    case FfnKind::MoE: f = moe_part(m, s); break;
    case FfnKind::AoE: f = aoe_part(m, s); break;
    case FfnKind::UoE: f = uoe_part(m, s); break;
  }
  f.saved += s.act(d, s.c);  // the FFN input: normed, in the compute dtype [N, d]
  return f;
}

// Final norm, output head (tied or not) and cross-entropy.
Part head_part(const ModelConfig& m, const Step& s) {
  const double d = double(m.d_model), V = double(m.vocab_size);
  Part h;
  h.saved = s.act(d, kF32) + s.act(1, kF32)                // final norm: the last block's output [N, d], 1/rms [N]
            + s.act(d, s.c)                                // head input [N, d]
            + s.act(V, s.c) + s.act(1, kF32);              // cross_entropy: the logits [N, V], float32 log-sum-exp [N]
  h.copies = s.mixed ? tensor_bytes(V * d, s.c) : 0;       // the head (or tied embedding) weight cast
  h.grads = tensor_bytes(V * d, s.p) + tensor_bytes(d, s.p);  // head (tied: held for the embedding's), final norm
  // backward: cross_entropy's d logits [N, V] (compute dtype) while the logits are kept; then the head's matmul,
  // d logits (read as they are) in the place of the released logits, with the weight's float32 copy when mixed:
  // dx [N, d], then dW [V, d] (float32, restored to the compute dtype when mixed; an untied head's copied into
  // .grad)
  const double copy = s.f32 ? 0 : kF32, restored = s.f32 ? 0 : s.c;
  const double dx = tensor_bytes(V * d, copy) + s.act(d, kF32 + restored);
  const double dw = s.act(d, restored + copy) + tensor_bytes(V * d, kF32 + restored) +
                    (m.tied_embeddings ? 0 : tensor_bytes(V * d, s.p));
  h.work = std::max({s.act(V, s.c), dx, dw});
  return h;
}

// Bytes per element of a floating dtype the estimate supports; the error names the option.
double float_bytes(DType t, const char* option) {
  UOE_CHECK(t == DType::Float32 || t == DType::BFloat16, "[estimate_training_memory] ", option,
            " must be float32 or bfloat16, got ", dtype_name(t));
  return double(dtype_size(t));
}

}  // namespace

MemoryEstimate estimate_training_memory(const ModelConfig& config, const MemoryOptions& o) {
  ModelConfig c = config;
  resolve_defaults(c);
  const int64_t seq = o.seq > 0 ? o.seq : c.context;
  UOE_CHECK(o.batch >= 1 && seq >= 1 && seq <= c.context, "[estimate_training_memory] batch must be >= 1 and seq in "
            "[1, context = ", c.context, "], got batch ", o.batch, " and seq ", seq);
  UOE_CHECK(o.optimizer == "adamw" || o.optimizer == "sgd", "[estimate_training_memory] optimizer '", o.optimizer,
            "': expected adamw or sgd");
  const int64_t E = o.expert_parallel;
  UOE_CHECK(o.ranks >= 1 && E >= 1 && o.ranks % E == 0, "[estimate_training_memory] ranks (", o.ranks,
            ") and expert_parallel (", E, ") must be >= 1, expert_parallel dividing ranks");
  UOE_CHECK(o.grad_accum >= 1, "[estimate_training_memory] grad_accum must be >= 1, got ", o.grad_accum);
  UOE_CHECK(E == 1 || (c.ffn.kind != FfnKind::Dense && c.ffn.n_experts % E == 0), "[estimate_training_memory] ",
            "expert_parallel ", E, " must divide the experts of an expert FFN (", c.name, ")");
  const double p = float_bytes(o.storage, "storage"), cb = float_bytes(o.compute, "compute");
  const Step s{.N = double(o.batch) * double(seq), .p = p, .c = cb, .f32 = cb == kF32, .mixed = cb != p,
               .cast_experts = cb != p, .ep = double(E)};
  const double d = double(c.d_model), L = double(c.n_layers), V = double(c.vocab_size);

  const Part attn = attention_part(c, s), ffn = ffn_part(c, s), head = head_part(c, s);
  Part blk;
  blk.saved = attn.saved + ffn.saved;
  blk.copies = attn.copies + ffn.copies;
  blk.grads = attn.grads + ffn.grads;
  // a block's backward: the residual stream's gradient [N, d] throughout; the FFN's backward, then the
  // attention's (the FFN's saved tensors released, its gradients made)
  blk.work = s.act(d, kF32) + std::max(ffn.work, ffn.grads - ffn.saved - ffn.copies + attn.work);

  MemoryEstimate e;
  e.parameters = L * blk.grads + tensor_bytes(V * d, p) * (c.tied_embeddings ? 1 : 2) + tensor_bytes(d, p);
  const double grads = e.parameters;                              // every parameter's gradient
  // AdamW: m and v; SGD: momentum (float32). ZeRO-1 splits each parameter's across the ranks that hold it.
  const double state = (o.optimizer == "adamw" ? 2 : 1) * kF32 / p;
  const double experts = L * layer_experts(c, double(E)).bytes(p);
  const double shards = o.zero1 ? double(o.ranks) : 1, expert_shards = o.zero1 ? double(o.ranks / E) : 1;
  e.optimizer = state * ((e.parameters - experts) / shards + experts / expert_shards);
  e.buckets = o.ranks > 1 ? grads * kF32 / p : 0;
  const double ids = 2 * s.act(1, kI64);                          // token ids and targets [N] int64

  // The candidate peaks (the forward's working set stays below the backward's), each as the bytes live
  // beyond the parameters and the optimiser state.
  struct Moment {
    const char* phase;
    double grads, activations, copies, transient;
    double live() const { return grads + activations + copies + transient; }
  };
  std::vector<Moment> moments;
  if (!o.checkpoint_activations) {
    const double acts = L * blk.saved + ids, copies = L * blk.copies;
    moments.push_back({"the loss backward", 0, acts + head.saved, copies + head.copies, head.work});
    moments.push_back({"the last block backward", head.grads, acts, copies, blk.work});
    moments.push_back({"the first block backward", head.grads + (L - 1) * blk.grads, blk.saved + ids, blk.copies,
                       blk.work});
  } else {
    // Each block keeps its input [N, d]; its backward recomputes the block, whose output stays as the root.
    const double in = s.act(d, kF32), recomputed = blk.saved;
    moments.push_back({"the loss backward", 0, L * in + ids + head.saved, head.copies, head.work});
    moments.push_back({"the last block backward", head.grads, L * in + ids + recomputed, blk.copies, blk.work});
    moments.push_back({"the first block backward", head.grads + (L - 1) * blk.grads,
                       in + ids + recomputed, blk.copies, blk.work});
  }
  // The embedding's backward, beyond every gradient: tied, the head's gradient waits while the embedding's is
  // scattered into a zero [V, d], then the two are summed (two tables); untied, the zero [V, d] it is scattered
  // into. (index_add and the sum run on bfloat16 directly.) Clipping scales each gradient in place (bfloat16 ones
  // too) and the optimiser updates in place: neither takes more.
  const double table = tensor_bytes(V * d, p);
  moments.push_back({"the embedding backward", grads, 0, 0, c.tied_embeddings ? 2 * table : table});
  // Accumulating over micro-batches, the later ones run with the earlier ones' gradients held (adding a new
  // gradient to .grad takes the transient that copying it there takes in the first)
  if (o.grad_accum > 1)
    for (Moment& m : moments) m.grads = grads;

  const Moment& peak = *std::max_element(moments.begin(), moments.end(),
                                         [](const Moment& a, const Moment& b) { return a.live() < b.live(); });
  e.gradients = peak.grads;
  e.activations = peak.activations;
  e.weight_copies = peak.copies;
  e.transient = peak.transient;
  e.phase = peak.phase;
  e.total = e.parameters + e.optimizer + e.buckets + peak.live();
  return e;
}

double estimate_inference_memory(const ModelConfig& config, const InferenceOptions& o) {
  ModelConfig c = config;
  resolve_defaults(c);
  const MemoryOptions training{.batch = o.batch, .seq = o.seq, .compute = o.compute};
  const double parameters = estimate_training_memory(c, training).parameters;  // validates the options
  const int64_t seq = o.seq > 0 ? o.seq : c.context;
  const double cb = float_bytes(o.compute, "compute");
  const Step s{.N = double(o.batch) * double(seq), .p = kF32, .c = cb, .f32 = cb == kF32, .mixed = cb != kF32,
               .cast_experts = cb != kF32, .ep = 1};
  const double d = double(c.d_model);
  const Part attn = attention_part(c, s), ffn = ffn_part(c, s), head = head_part(c, s);
  // Without gradients a block's attention and FFN each hold at most what they keep for backward in training, one
  // after the other, beside the residual stream [N, d].
  const double block = std::max(attn.saved + attn.copies, ffn.saved + ffn.copies);
  const double loss = head.saved + head.copies;  // the logits, their log-sum-exp (the loss is fused)
  const double kv = double(c.n_kv_heads) * d / double(c.n_heads);
  const double cache_row = tensor_bytes(double(o.batch) * double(c.context) * kv, kF32);  // keys or values of a layer
  const double cache = o.kv_cache ? 2 * double(c.n_layers) * cache_row : 0;
  // Loading: the model's parameters, and one tensor at a time initialised or converted beside them (the
  // checkpoint's file is mapped, not allocated).
  const double load = parameters + tensor_bytes(largest_parameter(c, 1), kF32);
  return std::max(load, parameters + cache + 2 * s.act(1, kI64) + s.act(d, kF32) + std::max(block, loss));
}

double training_flops_per_token(const ModelConfig& c, int64_t seq) {
  ModelConfig at_seq = c;
  at_seq.context = seq;
  return 3 * count_model(at_seq).flops;
}

ModelCounts count_model(const ModelConfig& c) {
  const double d = double(c.d_model), L = double(c.n_layers), V = double(c.vocab_size), T = double(c.context);
  const double dh = d / double(c.n_heads), kv = double(c.n_kv_heads) * dh;
  const double attn = 2 * d * d + 2 * d * kv, norms = 2 * d;
  const auto [ffn_total, ffn_active] = ffn_params(c);
  const double embed = V * d, head = c.tied_embeddings ? 0 : V * d;
  ModelCounts k;
  k.total = embed + head + L * (attn + norms + ffn_total) + d;
  k.active = embed + head + L * (attn + norms + ffn_active) + d;
  // 2 FLOPs per active weight (embedding lookups excluded, the output head included) plus causal attention
  k.flops = 2 * (L * (attn + ffn_active) + V * d) + L * 2 * T * d;
  k.memory = estimate_training_memory(c).total;
  return k;
}

}  // namespace uoe::nn
