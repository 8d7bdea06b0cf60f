// aoe_walkthrough: a lesson in Autonomy-of-Experts (AoE) routing, the load-balance loss and top-p routing. Four
// tokens go through an AoE layer: the factorised gate's first factor gives every expert a vector per token, its norm
// is the expert's score, the top K experts finish the computation, and the output is rebuilt by hand. The layer's
// load-balance loss (α = 0.01, the published MoE baselines' weight) is then worked out from the printed loads and
// probabilities, and top-p routing shows which experts each token keeps and why. Every printed number is checked.
// Usage: aoe_walkthrough [--quick]   (--quick runs the same lesson: it is small already)
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <numeric>
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

// T tokens of width d; n experts of D neurons, K chosen per token; the gate factorised at rank d_low.
constexpr int64_t T = 4, d = 8, n = 4, K = 2, D = 6, d_low = 2;
constexpr double alpha = 0.01;  // load-balance loss weight
constexpr double top_p = 0.6;

nn::ModelConfig layer_config(nn::Routing routing) {
  nn::ModelConfig c = expert_layer(nn::FfnKind::AoE, d, n, K, D);
  c.ffn.d_low = d_low;
  c.ffn.aux_loss = alpha;
  c.ffn.routing = routing;
  c.ffn.top_p = top_p;
  return c;
}

void check_close(double lhs, double rhs, const char* what) {
  UOE_CHECK(std::fabs(lhs - rhs) < 1e-6, "claim '", what, "' is false: ", lhs, " vs ", rhs);
  std::printf("check: %s   (%.7f vs %.7f)\n", what, lhs, rhs);
}

void print_routing(const ops::Route& route) {
  const auto idx = route.indices.to_vector<int64_t>();
  const auto w = route.weights.to_vector<float>();
  const int64_t slots = route.indices.size(1);
  for (int64_t t = 0; t < T; ++t) {
    std::printf("  token %ld ->", long(t));
    for (int64_t k = 0; k < slots; ++k)
      if (idx[size_t(t * slots + k)] >= 0)
        std::printf("  expert %ld (weight %.3f)", long(idx[size_t(t * slots + k)]), w[size_t(t * slots + k)]);
    std::printf("\n");
  }
}

// AoE expert e on every token: (silu(C_e W_up'[e]) ⊙ (x W_p[e])) W_o[e], C_e = x Ŵ_down[:, e·d_low : (e+1)·d_low].
Tensor aoe_expert(const Tensor& x, const Tensor& c, const nn::AoeFfn& layer, int64_t e) {
  const Tensor ce = c.narrow(1, e * d_low, d_low);                                  // [T, d_low]
  const Tensor g = ops::matmul(ce, layer.w.gate.select(0, e));                      // [T, D]
  const Tensor p = ops::matmul(x, layer.w.up.select(0, e));                         // [T, D]
  return ops::matmul(ops::silu(g) * p, layer.w.down.select(0, e));                  // [T, d]
}

// y_t = Σ over token t's non-empty slots of weight · parts[expert]_t.      [T, d]
Tensor combine(const ops::Route& route, const std::vector<Tensor>& parts) {
  const auto idx = route.indices.to_vector<int64_t>();
  const auto w = route.weights.to_vector<float>();
  const int64_t slots = route.indices.size(1);
  std::vector<Tensor> rows;
  for (int64_t t = 0; t < T; ++t) {
    Tensor row = zeros({d});
    for (int64_t k = 0; k < slots; ++k)
      if (idx[size_t(t * slots + k)] >= 0)
        row = row + double(w[size_t(t * slots + k)]) * parts[size_t(idx[size_t(t * slots + k)])].select(0, t);
    rows.push_back(row);
  }
  return ops::stack(rows);
}

// Top-p by hand for one token: experts by probability, best first, kept until the running sum exceeds p.
std::vector<int64_t> topp_by_hand(const std::vector<double>& probs, double p) {
  std::vector<int64_t> order(probs.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return probs[size_t(a)] > probs[size_t(b)]; });
  std::vector<int64_t> kept;
  double cum = 0;
  std::printf("   ");
  for (int64_t e : order) {
    kept.push_back(e);
    cum += probs[size_t(e)];
    std::printf("%s expert %ld (%.3f) = %.3f", kept.size() == 1 ? "" : " +", long(e), probs[size_t(e)], cum);
    if (cum > p) break;
  }
  std::printf("  > %.1f: keeps %zu\n", p, kept.size());
  return kept;
}

}  // namespace

int main() {
  try {
    manual_seed(1);
    const Tensor x = randn({T, d});
    show("x: a batch of T=4 tokens of width d=8   [T, d]", x);

    title("1. AoE: each expert's gate is W_g[i] = Ŵ_down[i] W_up'[i]; the first factor scores the expert");
    nn::AoeFfn aoe(layer_config(nn::Routing::TopK), 0.5);
    readable_init(aoe);
    const Tensor c = ops::matmul(x, aoe.gate_down);  // [T, n·d_low]
    show("C = x Ŵ_down: all n=4 experts' first gate factors side by side, d_low=2 columns each   [T, n·d_low]", c);
    const Tensor scores = ops::group_l2norm(c, n);  // [T, n]
    show("s_i = ‖C_i‖: how strongly expert i's own gate responds to the token   [T, n]", scores);
    std::vector<Tensor> norms;
    for (int64_t e = 0; e < n; ++e) norms.push_back(ops::sqrt(ops::sum(ops::pow(c.narrow(1, e * d_low, d_low), 2.0), {1})));
    check_same(scores, ops::stack(norms, 1), "s_i = sqrt(C_i,0² + C_i,1²) by hand");
    const ops::Route route = ops::topk_route(scores, K, ops::RouteWeights::TopKSoftmax);
    std::printf("\ntopk_route: the K=2 largest norms per token, weights = softmax over those two\n");
    print_routing(route);
    // Every expert computes its C_i (that is the routing); the selected ones reuse it and finish: the gate's second
    // factor W_up'[i] turns C_i into the D gate pre-activations, and the expert runs as a SwiGLU.
    std::vector<Tensor> experts;
    for (int64_t e = 0; e < n; ++e) experts.push_back(aoe_expert(x, c, aoe, e));  // [T, d] each
    show("E_0(x) = (silu(C_0 W_up'[0]) ⊙ (x W_p[0])) W_o[0], on every token   [T, d]", experts[0]);
    const nn::FfnOut out = aoe.forward(x);
    show("AoeFfn output: y_t = Σ_k w_tk E_k(x_t)   [T, d]", out.y);
    check_same(out.y, combine(route, experts), "AoeFfn output = Σ_k w_tk E_k(x_t) by hand");

    title("2. The load-balance loss α · n · Σ_i f_i P_i, by hand");
    const Tensor probs = ops::softmax(scores, -1);  // [T, n]
    show("P = softmax(s) per token   [T, n]", probs);
    const std::vector<double> mean_p = ops::mean(probs.to(DType::Float64), {0}).to_vector<double>();
    std::vector<double> f(n, 0.0);
    for (int64_t e : route.indices.to_vector<int64_t>()) f[size_t(e)] += 1.0 / double(T * K);
    double sum_fp = 0;
    std::printf("\n  expert  load f_i (share of the T·K=8 slots)  P_i (mean of its column of P)  f_i·P_i\n");
    for (int64_t e = 0; e < n; ++e) {
      sum_fp += f[size_t(e)] * mean_p[size_t(e)];
      std::printf("  %6ld  %8.4f                               %8.4f                       %.5f\n", long(e), f[size_t(e)],
                  mean_p[size_t(e)], f[size_t(e)] * mean_p[size_t(e)]);
    }
    const double by_hand = alpha * double(n) * sum_fp;
    std::printf("loss = α · n · Σ f_i P_i = %.2f · %ld · %.5f = %.7f\n(n Σ f_i P_i is 1 when loads and probabilities "
                "are uniform, and near n when one expert takes every slot with P_i near 1)\n",
                alpha, long(n), sum_fp, by_hand);
    check_close(out.aux.item<double>(), by_hand, "the layer's aux loss = the sum worked by hand");
    check_close(aoe.stats.routing().balance, double(n) * sum_fp, "the layer's routing summary: balance = n Σ f_i P_i");
    // f counts slots (no gradient); P is differentiable: d loss / d P[t, i] = α n f_i / T, so the loss lowers the
    // probability of each expert in proportion to its load, on every token alike.
    const Tensor p_leaf = probs.detach().to(DType::Float64).requires_grad_();
    (ops::load_balance_loss(p_leaf, route.indices) * alpha).backward();
    show("d loss / d P   [T, n]: every row is α n f / T", p_leaf.grad());
    std::vector<double> expected;
    for (int64_t t = 0; t < T; ++t)
      for (int64_t e = 0; e < n; ++e) expected.push_back(alpha * double(n) * f[size_t(e)] / double(T));
    check_same(p_leaf.grad(), from_vector(expected, {T, n}), "d loss / d P[t, i] = α n f_i / T, from the loads above");

    title("3. Top-p routing: as many experts as it takes for their probability to pass p = 0.6");
    // Each token keeps its experts in order of probability until the running sum exceeds p (at least one, at most
    // n): a confident token keeps one expert, a hesitant one several. Weights: softmax over the kept scores.
    const std::vector<double> pv = probs.to(DType::Float64).to_vector<double>();
    const ops::Route topp = ops::topp_route(scores, top_p, n, ops::RouteWeights::TopKSoftmax);
    const auto idx = topp.indices.to_vector<int64_t>();
    const auto wts = topp.weights.to_vector<float>();
    for (int64_t t = 0; t < T; ++t) {
      std::printf("token %ld:\n", long(t));
      const std::vector<double> row(pv.begin() + t * n, pv.begin() + (t + 1) * n);
      const std::vector<int64_t> kept = topp_by_hand(row, top_p);
      double kept_p = 0;
      for (int64_t e : kept) kept_p += row[size_t(e)];
      for (int64_t k = 0; k < n; ++k) {
        const int64_t want = k < int64_t(kept.size()) ? kept[size_t(k)] : -1;
        UOE_CHECK(idx[size_t(t * n + k)] == want, "token ", t, " slot ", k, ": topp_route chose ", idx[size_t(t * n + k)],
                  ", by hand ", want);
        const double w = want >= 0 ? row[size_t(want)] / kept_p : 0.0;  // softmax over the kept = P renormalised
        UOE_CHECK(std::fabs(wts[size_t(t * n + k)] - w) < 1e-6, "token ", t, " slot ", k, ": weight ",
                  wts[size_t(t * n + k)], ", by hand ", w);
      }
    }
    std::printf("topp_route (n=4 slots, -1 = empty):\n");
    print_routing(topp);
    std::printf("check: topp_route's indices and weights = the running sums above, weights P_i / Σ_kept P_j\n");

    nn::AoeFfn aoe_p(layer_config(nn::Routing::TopP), 0.5);
    {
      NoGradGuard no_grad;
      const nn::NamedTensors from = aoe.named_parameters();
      nn::NamedTensors to = aoe_p.named_parameters();  // same layer, same order
      for (size_t i = 0; i < to.size(); ++i) to[i].second.copy_(from[i].second);
    }
    const nn::FfnOut out_p = aoe_p.forward(x);
    check_same(out_p.y, combine(topp, experts), "AoeFfn with routing = topp: y_t = Σ over the kept experts, by hand");
    // Its auxiliary loss: the balance loss over the non-empty slots, plus 1e-4 times the mean entropy of P (the
    // top-p paper's regulariser: it rewards confident routing, which keeps fewer experts).
    double kept_total = 0, sum_fp_p = 0, entropy = 0;
    std::vector<double> load(n, 0.0);
    for (int64_t e : idx)
      if (e >= 0) load[size_t(e)] += 1, kept_total += 1;
    for (int64_t e = 0; e < n; ++e) sum_fp_p += load[size_t(e)] / kept_total * mean_p[size_t(e)];
    for (double v : pv) entropy -= v * std::log(v) / double(T);
    const double aux_p = alpha * double(n) * sum_fp_p + 1e-4 * entropy;
    std::printf("%.0f experts run in all (top-K: %ld); balance n Σ f_i P_i = %.5f, mean entropy of P = %.5f\n",
                kept_total, long(T * K), double(n) * sum_fp_p, entropy);
    check_close(out_p.aux.item<double>(), aux_p, "aux = α n Σ f_i P_i + 1e-4 · entropy, by hand");
    std::printf("\nall checks passed\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "aoe_walkthrough FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
