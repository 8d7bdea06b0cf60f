// sparse_dispatch: a lesson in how a Mixture-of-Experts layer runs its experts sparsely. Five tokens are routed to
// K=2 of n=3 experts; the dispatch is then written out step by step (gather each expert's tokens, run each expert
// on its own rows only, weight and add the rows back) and checked against ops::expert_ffn, the fused op the MoE
// layers use. Its gradient is compared with a dense composition (every expert on every token, multiplied by a
// gate matrix that is 0 where a token did not pick the expert), and checked by finite differences.
// Usage: sparse_dispatch [--quick]   (--quick runs the same lesson: it is small already)
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/rng.h"
#include "ops/gradcheck.h"
#include "ops/moe.h"
#include "ops/ops.h"

#include "lesson.h"

using namespace uoe;
using namespace uoe::lesson;

namespace {

// T tokens of width d; n experts of D neurons, K chosen per token. Float64 throughout, so the two paths' gradients
// can be compared to 1e-12.
constexpr int64_t T = 5, d = 4, n = 3, K = 2, D = 3;
const TensorOptions f64 = TensorOptions{}.with_dtype(DType::Float64);

struct Experts {
  Tensor gate, up, down;  // [n, d, D], [n, d, D], [n, D, d]
};

// Expert e on rows x: (silu(x W_g[e]) ⊙ (x W_p[e])) W_o[e].   [rows, d] -> [rows, d]
Tensor expert(const Tensor& x, const Experts& w, int64_t e) {
  return ops::matmul(ops::silu(ops::matmul(x, w.gate.select(0, e))) * ops::matmul(x, w.up.select(0, e)),
                     w.down.select(0, e));
}

// The (token, slot) pairs routed to expert e, in token order.
struct Bucket {
  std::vector<int64_t> tokens, slots;
};
std::vector<Bucket> buckets_of(const Tensor& indices) {
  const auto idx = indices.to_vector<int64_t>();
  std::vector<Bucket> b(n);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) {
      b[size_t(idx[size_t(t * K + k)])].tokens.push_back(t);
      b[size_t(idx[size_t(t * K + k)])].slots.push_back(t * K + k);
    }
  return b;
}

Tensor int64s(const std::vector<int64_t>& v) {
  return from_vector(v, {int64_t(v.size())}, TensorOptions{}.with_dtype(DType::Int64));
}

// The sparse path written out: gather, run each expert on its rows, weight, add back (index_add).   [T, d]
Tensor dispatch_by_hand(const Tensor& x, const Tensor& indices, const Tensor& weights, const Experts& w, bool print) {
  const std::vector<Bucket> buckets = buckets_of(indices);
  const Tensor flat_weights = weights.reshape({T * K});  // [T·K]
  Tensor y = zeros({T, d}, f64);
  for (int64_t e = 0; e < n; ++e) {
    const Bucket& b = buckets[size_t(e)];
    if (b.tokens.empty()) continue;
    const Tensor rows = ops::index_select(x, 0, int64s(b.tokens));             // gather: [m_e, d]
    const Tensor out = expert(rows, w, e);                                      // grouped expert: [m_e, d]
    const Tensor wts = ops::index_select(flat_weights, 0, int64s(b.slots));    // [m_e]
    y = ops::index_add(y, 0, int64s(b.tokens), out * wts.unsqueeze(1));        // combine: y[t] += w_tk E_e(x_t)
    if (print) {
      std::printf("expert %ld: tokens", long(e));
      for (int64_t t : b.tokens) std::printf(" %ld", long(t));
      std::printf("  (%zu rows of %ld)\n", b.tokens.size(), long(T));
    }
  }
  return y;
}

// The gate matrix G [T, n]: G[t, e] = the weight of e in token t's route, 0 where t did not pick e (scatter_add of
// the route weights into zeros). It is differentiable in the weights.
Tensor gate_matrix(const Tensor& indices, const Tensor& weights) {
  return ops::scatter_add(zeros({T, n}, f64), 1, indices, weights);
}

// The dense composition: every expert on every token, times its column of G.   [T, d]
Tensor dense_with_mask(const Tensor& x, const Tensor& indices, const Tensor& weights, const Experts& w) {
  const Tensor g = gate_matrix(indices, weights);  // [T, n]
  Tensor y = zeros({T, d}, f64);
  for (int64_t e = 0; e < n; ++e) y = y + expert(x, w, e) * g.narrow(1, e, 1);
  return y;
}

struct Leaves {
  Tensor x, logits;
  Experts w;
  std::vector<Tensor> all() const { return {x, logits, w.gate, w.up, w.down}; }
};

Leaves fresh_leaves(const Leaves& from) {
  auto leaf = [](const Tensor& t) { return t.detach().clone().requires_grad_(); };
  return {leaf(from.x), leaf(from.logits), {leaf(from.w.gate), leaf(from.w.up), leaf(from.w.down)}};
}

// The sparse layer as the MoE layers run it: route by logits (top-K, softmax over the K), then expert_ffn.
Tensor sparse_layer(const Tensor& x, const Tensor& logits, const Experts& w) {
  const ops::Route route = ops::topk_route(logits, K, ops::RouteWeights::TopKSoftmax);
  return ops::expert_ffn(x, route.indices, route.weights, w.gate, w.up, w.down, 0, D);
}

Tensor dense_layer(const Tensor& x, const Tensor& logits, const Experts& w) {
  const ops::Route route = ops::topk_route(logits, K, ops::RouteWeights::TopKSoftmax);
  return dense_with_mask(x, route.indices, route.weights, w);
}

}  // namespace

int main() {
  try {
    manual_seed(3);
    const Leaves base{randn({T, d}, f64), randn({T, n}, f64),
                      {randn({n, d, D}, f64) * 0.5, randn({n, d, D}, f64) * 0.5, randn({n, D, d}, f64) * 0.5}};
    show("x: T=5 tokens of width d=4   [T, d]", base.x);
    show("router logits   [T, n]", base.logits);

    title("1. Routing: the K=2 best logits per token, weights = softmax over those two");
    const ops::Route route = ops::topk_route(base.logits, K, ops::RouteWeights::TopKSoftmax);
    show("indices   [T, K]", route.indices);
    show("weights   [T, K]", route.weights);
    const auto l = base.logits.to_vector<double>();
    const auto idx = route.indices.to_vector<int64_t>();
    const double l0 = l[size_t(idx[0])], l1 = l[size_t(idx[1])], w0 = 1 / (1 + std::exp(l1 - l0));
    std::printf("token 0: logits %.4f and %.4f -> weight of the first = 1 / (1 + exp(%.4f - %.4f)) = %.4f\n", l0, l1,
                l1, l0, w0);
    check_exact(route.weights.select(0, 0).select(0, 0), ops::scalar_like(w0, base.x), "token 0's first weight by hand");

    title("2. Dispatch: gather each expert's tokens, run it on those rows only, add the weighted rows back");
    const Tensor by_hand = dispatch_by_hand(base.x, route.indices, route.weights, base.w, true);
    std::printf("%ld expert rows computed in all (T·K), where running every expert on every token takes %ld (T·n)\n",
                long(T * K), long(T * n));
    const Tensor fused = ops::expert_ffn(base.x, route.indices, route.weights, base.w.gate, base.w.up, base.w.down, 0, D);
    show("ops::expert_ffn output   [T, d]", fused);
    check_exact(fused, by_hand, "expert_ffn = gather, per-expert SwiGLU, weighted index_add, by hand");

    title("3. The same layer as a dense composition with a 0/1 mask");
    const Tensor g = gate_matrix(route.indices, route.weights);
    show("G: route weights scattered into [T, n] (0 where the expert was not picked)", g);
    const Tensor mask = ops::gt(g, ops::scalar_like(0.0, g)).to(DType::Float64);
    show("mask = (G > 0)   [T, n]", mask);
    check_exact(ops::sum(mask, {1}), full({T}, double(K), f64), "every token picked exactly K experts");
    const Tensor dense = dense_with_mask(base.x, route.indices, route.weights, base.w);
    check_exact(fused, dense, "expert_ffn = Σ_e G[:, e] ⊙ E_e(x) over all experts and tokens");

    title("4. Gradients: sparse path vs dense composition, for L = Σ y ⊙ c");
    const Tensor c = randn({T, d}, f64);
    const Leaves sp = fresh_leaves(base), de = fresh_leaves(base);
    ops::sum(sparse_layer(sp.x, sp.logits, sp.w) * c).backward();
    ops::sum(dense_layer(de.x, de.logits, de.w) * c).backward();
    const char* names[] = {"x", "logits", "W_gate", "W_up", "W_down"};
    const std::vector<Tensor> a = sp.all(), b = de.all();
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string claim = std::string("dL/d") + names[i] + ": sparse = dense";
      std::printf("|dL/d%s| = %.6f   ", names[i], std::sqrt(ops::sum(a[i].grad() * a[i].grad()).item<double>()));
      check_exact(a[i].grad(), b[i].grad(), claim.c_str());
    }
    std::printf("The dense path computes every E_e(x_t) and multiplies the unpicked ones by 0: the same gradient,\n"
                "T·n expert rows instead of T·K. Unpicked router logits get no gradient (the choice has none):\n");
    const Tensor unpicked = ops::eq(mask, ops::scalar_like(0.0, mask)).to(DType::Float64);  // 1 - mask
    const Tensor unpicked_grad = sp.logits.grad() * unpicked;
    std::printf("max |dL/dlogit| where the expert was not picked = %.1e\n", ops::max(ops::abs(unpicked_grad)).item<double>());
    UOE_CHECK(ops::max(ops::abs(unpicked_grad)).item<double>() == 0, "unpicked logits must get no gradient");

    title("5. Finite differences on the sparse path (ops/gradcheck.h)");
    // Indices fixed (the routing of section 1), so the function is smooth in x, the weights and the three W.
    const gradcheck::Report report = gradcheck::check_gradients(
        [&](const std::vector<Tensor>& v) {
          return ops::expert_ffn(v[0], route.indices, v[1], v[2], v[3], v[4], 0, D);
        },
        {base.x, route.weights, base.w.gate, base.w.up, base.w.down});
    std::printf("expert_ffn: %s\n", report.summary().c_str());
    UOE_CHECK(report.passed, "expert_ffn's gradient must match finite differences");

    std::printf("\nall checks passed\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sparse_dispatch FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
