// moe_walkthrough: a lesson in Mixture-of-Experts internals. Four tokens go through a router MoE layer and
// a Union-of-Experts (UoE) layer side by side; every intermediate is printed, each layer's output is rebuilt
// by hand from the printed pieces (and checked), and one token's backward shows which weights learn from it.
// Usage: moe_walkthrough [--quick]   (--quick runs the same lesson: it is small already)
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/ffn.h"
#include "ops/ops.h"

#include "lesson.h"

using namespace uoe;
using namespace uoe::lesson;

namespace {

// T tokens of width d; n experts of D neurons, K chosen per token; UoE: r routing neurons per expert.
constexpr int64_t T = 4, d = 8, n = 4, K = 2, D = 8, r = 2;

nn::ModelConfig layer_config(nn::FfnKind kind) {
  nn::ModelConfig c = expert_layer(kind, d, n, K, D);
  c.ffn.routing_neurons = r;
  return c;
}

// Frobenius norm; 0 for a tensor that received no gradient at all.
double norm(const Tensor& t) { return t.defined() ? std::sqrt(ops::sum(t * t).item<double>()) : 0.0; }

// Expert e on every token, neurons [n0, n1) only:
//   (silu(x W_g[e][:, n0:n1]) ⊙ (x W_p[e][:, n0:n1])) W_o[e][n0:n1, :]     [T, d]
Tensor expert_part(const Tensor& x, const nn::ExpertWeights& w, int64_t e, int64_t n0, int64_t n1) {
  const Tensor g = ops::matmul(x, w.gate.select(0, e).narrow(1, n0, n1 - n0));  // [T, n1-n0]
  const Tensor p = ops::matmul(x, w.up.select(0, e).narrow(1, n0, n1 - n0));    // [T, n1-n0]
  return ops::matmul(ops::silu(g) * p, w.down.select(0, e).narrow(0, n0, n1 - n0));
}

void print_routing(const ops::Route& route) {
  const auto idx = route.indices.to_vector<int64_t>();
  const auto w = route.weights.to_vector<float>();
  for (int64_t t = 0; t < T; ++t) {
    std::printf("  token %ld ->", long(t));
    for (int64_t k = 0; k < K; ++k) std::printf("  expert %ld (weight %.3f)", long(idx[t * K + k]), w[t * K + k]);
    std::printf("\n");
  }
}

// y_t = base_t + Σ_k weights[t,k] · parts[indices[t,k]]_t, written as the loop it is.      [T, d]
Tensor combine(const Tensor& base, const ops::Route& route, const std::vector<Tensor>& parts) {
  const auto idx = route.indices.to_vector<int64_t>();
  const auto w = route.weights.to_vector<float>();
  std::vector<Tensor> rows;
  for (int64_t t = 0; t < T; ++t) {
    Tensor row = base.select(0, t);  // [d]
    for (int64_t k = 0; k < K; ++k) row = row + double(w[t * K + k]) * parts[idx[t * K + k]].select(0, t);
    rows.push_back(row);
  }
  return ops::stack(rows);
}

bool selected_by(const ops::Route& route, int64_t t, int64_t e) {
  const auto idx = route.indices.to_vector<int64_t>();
  for (int64_t k = 0; k < K; ++k)
    if (idx[t * K + k] == e) return true;
  return false;
}

// loss = Σ_j y[0, j] c_j: a gradient that comes from token 0 alone.
void backward_from_token0(nn::Ffn& layer, const Tensor& x, const Tensor& c) {
  layer.zero_grad();
  ops::sum(layer.forward(x).y.select(0, 0) * c).backward();
}

}  // namespace

int main() {
  try {
    manual_seed(0);
    const Tensor x = randn({T, d});
    show("x: a batch of T=4 tokens of width d=8   [T, d]", x);

    title("1. MoE: a linear router picks K=2 of n=4 experts per token");
    nn::MoeFfn moe(layer_config(nn::FfnKind::MoE), 0.5);
    readable_init(moe);
    const Tensor logits = ops::matmul(x, moe.router);  // [T, n]
    show("router logits x W_r   [T, n]", logits);
    const ops::Route moe_route = ops::topk_route(logits, K, ops::RouteWeights::TopKSoftmax);
    std::printf("\ntopk_route: the K best logits per token, weights = softmax over those K alone\n");
    print_routing(moe_route);
    // Here every expert runs on every token so the pieces can be printed; the layer (ops::expert_ffn)
    // runs only the T·K selected (token, expert) pairs.
    std::vector<Tensor> moe_experts;
    for (int64_t e = 0; e < n; ++e) moe_experts.push_back(expert_part(x, moe.w, e, 0, D));  // [T, d] each
    show("E_0(x): expert 0 (all D=8 neurons) on every token   [T, d]", moe_experts[0]);
    const Tensor moe_y = moe.forward(x).y;
    show("MoeFfn output: y_t = Σ_k w_tk E_k(x_t)   [T, d]", moe_y);
    check_same(moe_y, combine(zeros({T, d}), moe_route, moe_experts), "MoeFfn output = Σ_k w_tk E_k(x_t) by hand");

    title("2. UoE: no router; each expert's first r=2 neurons are its routing neurons");
    nn::UoeFfn uoe(layer_config(nn::FfnKind::UoE), 0.5);
    readable_init(uoe);
    const nn::RoutingActivations act = nn::routing_activations(x, uoe.w.gate, uoe.w.up, r, nn::ScoreSource::SwiGLU);
    show("H = silu(x Ŵ_g^R) ⊙ (x Ŵ_p^R): the routing neurons of all experts, on every token   [T, n·r]", act.h);
    const Tensor scores = ops::group_l2norm(act.h, n);  // [T, n]
    show("s_i = ‖H_i‖: an expert's score is how strongly its own routing neurons fire   [T, n]", scores);
    const ops::Route uoe_route = ops::topk_route(scores, K, ops::RouteWeights::TopKSoftmax);
    std::printf("\ntopk_route on the scores, weights = softmax over the K selected scores\n");
    print_routing(uoe_route);
    // The routing neurons' outputs are kept: all n experts' routing parts, selected or not, form one
    // dense "virtual shared expert" of width n·r, computed as one GEMM with Ŵ_o^R.
    const Tensor wo_r = uoe.w.down.narrow(1, 0, r).reshape({n * r, d});  // Ŵ_o^R [n·r, d]
    const Tensor vse = ops::matmul(act.h, wo_r);                          // [T, d]
    show("VSE = H Ŵ_o^R: the virtual shared expert   [T, d]", vse);
    Tensor routing_parts = zeros({T, d});
    for (int64_t e = 0; e < n; ++e) routing_parts = routing_parts + expert_part(x, uoe.w, e, 0, r);
    check_same(vse, routing_parts, "VSE = Σ over all n experts of their neurons [0, r)");
    // The selected experts then run only their remaining neurons [r, D): the routing part is in the VSE already.
    std::vector<Tensor> uoe_rest;
    for (int64_t e = 0; e < n; ++e) uoe_rest.push_back(expert_part(x, uoe.w, e, r, D));  // [T, d] each
    show("expert 0, neurons [r, D) = [2, 8), on every token   [T, d]", uoe_rest[0]);
    const Tensor uoe_y = uoe.forward(x).y;
    show("UoeFfn output: y_t = VSE_t + Σ_k w_tk E_k[r:D](x_t)   [T, d]", uoe_y);
    check_same(uoe_y, combine(vse, uoe_route, uoe_rest), "UoeFfn output = VSE_t + Σ_k w_tk E_k[r:D](x_t) by hand");

    title("3. Backward from token 0 alone: who learns?");
    const Tensor c = randn({d});
    backward_from_token0(moe, x, c);
    std::printf("MoE: gradient norms per expert after backward from token 0\n  expert  selected  |dW_gate|  |dW_up|  |dW_down|  |d router column|\n");
    std::vector<Tensor> router_columns;
    for (int64_t e = 0; e < n; ++e) {
      const bool sel = selected_by(moe_route, 0, e);
      const Tensor col = moe.router.grad().select(1, e);  // [d]
      const double gg = norm(moe.w.gate.grad().select(0, e)), gu = norm(moe.w.up.grad().select(0, e)),
                   gd = norm(moe.w.down.grad().select(0, e)), gr = norm(col);
      std::printf("  %6ld  %8s  %9.5f  %7.5f  %9.5f  %17.5f\n", long(e), sel ? "yes" : "no", gg, gu, gd, gr);
      UOE_CHECK(sel == (gg > 0 && gu > 0 && gd > 0 && gr > 0) && (sel || gg + gu + gd + gr == 0),
                "MoE expert ", e, ": selected must mean gradient, unselected exactly none");
      if (sel) router_columns.push_back(col);
    }
    // softmax over two logits depends only on their difference: the two router columns get opposite gradients.
    UOE_CHECK(norm(router_columns[0] + router_columns[1]) < 1e-6, "MoE: selected router columns must get opposite gradients");
    std::printf("An unselected expert never ran on token 0, so it gets no gradient, and neither does its router\n"
                "column (the top-K choice has no gradient). The two selected router columns get opposite gradients.\n");

    backward_from_token0(uoe, x, c);
    std::printf("\nUoE   |dW_gate| split into routing neurons [0, r) and the rest [r, D); same for W_down\n"
                "  expert  selected  gate[0,r)  gate[r,D)  down[0,r)  down[r,D)\n");
    for (int64_t e = 0; e < n; ++e) {
      const bool sel = selected_by(uoe_route, 0, e);
      const Tensor gg = uoe.w.gate.grad().select(0, e), gd = uoe.w.down.grad().select(0, e);  // [d, D], [D, d]
      const double g_routing = norm(gg.narrow(1, 0, r)), g_rest = norm(gg.narrow(1, r, D - r));
      const double d_routing = norm(gd.narrow(0, 0, r)), d_rest = norm(gd.narrow(0, r, D - r));
      std::printf("  %6ld  %8s  %9.5f  %9.5f  %9.5f  %9.5f\n", long(e), sel ? "yes" : "no", g_routing, g_rest, d_routing,
                  d_rest);
      UOE_CHECK(g_routing > 0 && d_routing > 0, "UoE expert ", e, ": routing neurons must always get gradient");
      UOE_CHECK(sel == (g_rest > 0 && d_rest > 0) && (sel || g_rest + d_rest == 0), "UoE expert ", e,
                ": neurons [r, D) must get gradient exactly when selected");
    }
    std::printf("Every expert's routing neurons learn from every token: through the VSE always, and for the\n"
                "selected experts also through score -> weight (examples/routing_gradients separates the two).\n"
                "Neurons [r, D) learn only from the tokens that selected their expert.\n");
    std::printf("\nall checks passed\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "moe_walkthrough FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
