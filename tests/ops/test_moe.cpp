// MoE ops: finite-difference gradients, fused expert_ffn vs primitive ops, determinism, hand cases, bad input.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "core/error.h"
#include "core/rng.h"
#include "gradcheck.h"
#include "ops/moe.h"
#include "ops/ops.h"

namespace uoe::testing {
namespace {

using V = std::vector<Tensor>;
using ops::RouteWeights;
const TensorOptions kI64 = TensorOptions{}.with_dtype(DType::Int64);
const TensorOptions kF64 = TensorOptions{}.with_dtype(DType::Float64);

Tensor idx(std::vector<int64_t> v, Shape s) { return from_vector(v, s, kI64); }

// 6 tokens, K = 2, n = 4: empty slots (-1), a duplicated expert in one token, expert 3 gets no token.
const std::vector<int64_t> kSlots = {0, 2, 1, -1, 2, 0, -1, -1, 1, 1, 0, 1};
constexpr int64_t kT = 6, kK = 2, kN = 4, kD = 4, kWidth = 5;

// ---------------------------------------------------------------------------------------------------------
// Finite-difference gradient checks (float64), contiguous and strided inputs.
std::vector<GradCase> cases() {
  std::vector<GradCase> c;
  for (auto [mode, tag] :
       {std::pair{RouteWeights::TopKSoftmax, "topk_softmax"}, {RouteWeights::FullSoftmax, "full_softmax"}}) {
    const RouteWeights m = mode;
    c.push_back(
        {std::string("topk_route_") + tag, {{5, 6}}, [m](const V& x) { return ops::topk_route(x[0], 2, m).weights; }});
    c.push_back({std::string("topk_route_all_") + tag, {{3, 4}}, [m](const V& x) {
                   return ops::topk_route(x[0], 4, m).weights;
                 }});
    c.push_back({std::string("topp_route_") + tag, {{6, 5}}, [m](const V& x) {
                   return ops::topp_route(x[0], 0.6, 3, m).weights;
                 }});
  }
  c.push_back({"group_l2norm", {{4, 12}}, [](const V& x) { return ops::group_l2norm(x[0], 3); }});
  c.push_back({"group_l2norm_3d", {{2, 3, 8}}, [](const V& x) { return ops::group_l2norm(x[0], 2); }});
  c.push_back({"load_balance_loss", {{6, 4}}, [](const V& x) {
                 return ops::load_balance_loss(ops::softmax(x[0], -1), idx(kSlots, {kT, kK}));
               }});
  c.push_back({"router_z_loss", {{5, 4}}, [](const V& x) { return ops::router_z_loss(x[0]); }});
  c.push_back({"router_z_loss_3d", {{2, 3, 4}}, [](const V& x) { return ops::router_z_loss(x[0] * 3.0); }});
  // expert_ffn: x, weights, W_gate, W_up, W_down [, gate_input]
  const Shape xs{kT, kD}, ws{kT, kK}, wg{kN, kD, kWidth}, wu{kN, kD, kWidth}, wd{kN, kWidth, kD};
  for (auto [r0, name] : {std::pair<int64_t, const char*>{0, "expert_ffn_full"}, {2, "expert_ffn_range"}}) {
    const int64_t lo = r0;
    c.push_back({name, {xs, ws, wg, wu, wd}, [lo](const V& x) {
                   return ops::expert_ffn(x[0], idx(kSlots, {kT, kK}), x[1], x[2], x[3], x[4], lo, kWidth);
                 }});
  }
  c.push_back({"expert_ffn_gate_input", {xs, ws, {kN, 3, kWidth}, wu, wd, {kT, kN, 3}}, [](const V& x) {
                 return ops::expert_ffn(x[0], idx(kSlots, {kT, kK}), x[1], x[2], x[3], x[4], 1, 4, x[5]);
               }});
  c.push_back({"expert_ffn_shared_gate_input", {xs, ws, {kN, 3, kWidth}, wu, wd, {kT, 1, 3}}, [](const V& x) {
                 return ops::expert_ffn(x[0], idx(kSlots, {kT, kK}), x[1], x[2], x[3], x[4], 1, 4, x[5]);
               }});
  return c;
}

class MoeGradCheck : public ::testing::TestWithParam<GradCase> {};
TEST_P(MoeGradCheck, Contiguous) { EXPECT_EQ(check_gradients(GetParam(), Layout::Contiguous, 3), ""); }
TEST_P(MoeGradCheck, Strided) { EXPECT_EQ(check_gradients(GetParam(), Layout::Strided, 4), ""); }
INSTANTIATE_TEST_SUITE_P(Moe, MoeGradCheck, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return info.param.name; });

// ---------------------------------------------------------------------------------------------------------
// Fused ops equal the same math composed of primitive ops: forward and every input gradient (float64).
void expect_same(const std::vector<Shape>& shapes, const OpFn& fused, const OpFn& composed, double tol = 1e-10) {
  expect_fused_equals_composed(shapes, fused, composed, tol, 200);
}

// expert_ffn written with matmul, silu, index_select, narrow, mul and index_add: a loop over experts.
Tensor composed_ffn(const Tensor& x, const std::vector<int64_t>& slots, int64_t K, const Tensor& weights,
                    const Tensor& wg, const Tensor& wu, const Tensor& wd, int64_t r0, int64_t r1,
                    const Tensor& gate = Tensor()) {
  const int64_t T = x.size(0), n = wu.size(0), R = r1 - r0;
  Tensor y = zeros({T, x.size(1)}, kF64);
  for (int64_t e = 0; e < n; ++e) {
    std::vector<int64_t> toks, pairs;
    for (int64_t i = 0; i < T * K; ++i)
      if (slots[size_t(i)] == e) toks.push_back(i / K), pairs.push_back(i);
    if (toks.empty()) continue;
    const Tensor tok = idx(toks, {int64_t(toks.size())}), pr = idx(pairs, {int64_t(pairs.size())});
    const Tensor X = ops::index_select(x, 0, tok);                                       // [m, d]
    const Tensor G = gate.defined() ? ops::index_select(gate.select(1, e), 0, tok) : X;  // [m, d_g]
    const Tensor A = ops::silu(ops::matmul(G, wg.select(0, e).narrow(1, r0, R))) *
                     ops::matmul(X, wu.select(0, e).narrow(1, r0, R));              // [m, R]
    const Tensor O = ops::matmul(A, wd.select(0, e).narrow(0, r0, R));              // [m, d]
    const Tensor w = ops::index_select(weights.reshape({-1}), 0, pr).unsqueeze(1);  // [m, 1]
    y = ops::index_add(y, 0, tok, O * w);
  }
  return y;
}

TEST(MoeFusedVsComposed, ExpertFfn) {
  const int64_t T = 9, K = 3, n = 5, d = 6, D = 8;
  // expert 4 gets no token, -1 slots, token 2 picks expert 1 twice
  const std::vector<int64_t> s = {0,  1, 2, 3, -1, 0, 1, 1, -1, 2,  2, 0, -1, -1,
                                  -1, 3, 0, 1, 1,  2, 3, 0, 3,  -1, 2, 1, 0};
  const Tensor I = idx(s, {T, K});
  for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, D}, {3, D}, {2, 5}}) {
    SCOPED_TRACE(::testing::Message() << "neurons [" << r0 << ", " << r1 << ")");
    expect_same(
        {{T, d}, {T, K}, {n, d, D}, {n, d, D}, {n, D, d}},
        [&](const V& x) { return ops::expert_ffn(x[0], I, x[1], x[2], x[3], x[4], r0, r1); },
        [&](const V& x) { return composed_ffn(x[0], s, K, x[1], x[2], x[3], x[4], r0, r1); });
    // AoE: per-expert gate inputs [T, n, d_low]
    expect_same(
        {{T, d}, {T, K}, {n, 3, D}, {n, d, D}, {n, D, d}, {T, n, 3}},
        [&](const V& x) { return ops::expert_ffn(x[0], I, x[1], x[2], x[3], x[4], r0, r1, x[5]); },
        [&](const V& x) { return composed_ffn(x[0], s, K, x[1], x[2], x[3], x[4], r0, r1, x[5]); });
    // One gate input per token shared by the experts [T, 1, d_low]: the per-expert form of its broadcast
    expect_same(
        {{T, d}, {T, K}, {n, 3, D}, {n, d, D}, {n, D, d}, {T, 1, 3}},
        [&](const V& x) { return ops::expert_ffn(x[0], I, x[1], x[2], x[3], x[4], r0, r1, x[5]); },
        [&](const V& x) { return composed_ffn(x[0], s, K, x[1], x[2], x[3], x[4], r0, r1, x[5].expand({T, n, 3})); });
  }
}

TEST(MoeFusedVsComposed, RoutingAndLosses) {
  for (int64_t k : {1, 2, 4}) {
    expect_same(
        {{7, 5}}, [k](const V& x) { return ops::topk_route(x[0], k, RouteWeights::TopKSoftmax).weights; },
        [k](const V& x) { return ops::softmax(ops::topk(x[0], k, -1).first, -1); });
    expect_same(
        {{7, 5}}, [k](const V& x) { return ops::topk_route(x[0], k, RouteWeights::FullSoftmax).weights; },
        [k](const V& x) { return ops::gather(ops::softmax(x[0], -1), 1, ops::topk(x[0], k, -1).second); });
  }
  // indices agree with topk (same tie rule)
  const Tensor sc = random_double({7, 5}, 3);
  EXPECT_EQ(ops::topk_route(sc, 3, RouteWeights::TopKSoftmax).indices.to_vector<int64_t>(),
            ops::topk(sc, 3, -1).second.to_vector<int64_t>());
  expect_same(
      {{4, 12}}, [](const V& x) { return ops::group_l2norm(x[0], 3); },
      [](const V& x) {
        return ops::sqrt(ops::sum(x[0].reshape({4, 3, 4}) * x[0].reshape({4, 3, 4}), {-1}));
      });
  expect_same(
      {{6, 5}}, [](const V& x) { return ops::router_z_loss(x[0]); },
      [](const V& x) {
        const Tensor m = ops::max(x[0], 1, true).detach();
        const Tensor lse = ops::log(ops::sum(ops::exp(x[0] - m), {1}, true)) + m;
        return ops::mean(lse * lse);
      });
  // load balance: n * sum_i f_i mean_t probs[:, i], f = counts / non-empty pairs = [3, 4, 2, 0] / 9
  expect_same(
      {{6, 4}},
      [](const V& x) {
        return ops::load_balance_loss(x[0], idx(kSlots, {kT, kK}));
      },
      [](const V& x) {
        const Tensor f = from_vector<double>({3.0 / 9, 4.0 / 9, 2.0 / 9, 0.0}, {4});
        return ops::sum(ops::mean(x[0], {0}) * f) * 4.0;
      });
}

// ---------------------------------------------------------------------------------------------------------
// Hand-computed cases.
TEST(MoeRoute, TiesTakeLowerIndexFirst) {
  const Tensor s = from_vector<double>({1, 3, 3, 0, 2, 2, 2, 2, 5, -1, 5, 5}, {3, 4});
  const ops::Route r = ops::topk_route(s, 2, RouteWeights::TopKSoftmax);
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{1, 2, 0, 1, 0, 2}));
  for (double w : r.weights.to_vector<double>()) EXPECT_DOUBLE_EQ(w, 0.5);
  // same rule in top-p: equal probabilities 1/4 each, p = 0.3 needs two of them
  const ops::Route p = ops::topp_route(s.narrow(0, 1, 1), 0.3, 4, RouteWeights::FullSoftmax);
  EXPECT_EQ(p.indices.to_vector<int64_t>(), (std::vector<int64_t>{0, 1, -1, -1}));
}

TEST(MoeRoute, HandComputed) {
  // probabilities [1, 2, 5, 2] / 10
  const Tensor s = from_vector<double>({0.0, std::log(2.0), std::log(5.0), std::log(2.0)}, {1, 4});
  auto near = [](const Tensor& t, std::vector<double> want) {
    const auto got = t.to_vector<double>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-15) << "slot " << i;
  };
  ops::Route r = ops::topk_route(s, 2, RouteWeights::TopKSoftmax);
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 1}));
  near(r.weights, {5.0 / 7, 2.0 / 7});
  near(ops::topk_route(s, 2, RouteWeights::FullSoftmax).weights, {0.5, 0.2});
  // top-p: 0.5 is not > 0.6, 0.5 + 0.2 is: two experts
  r = ops::topp_route(s, 0.6, 3, RouteWeights::FullSoftmax);
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, -1}));
  near(r.weights, {0.5, 0.2, 0.0});
  near(ops::topp_route(s, 0.6, 3, RouteWeights::TopKSoftmax).weights, {5.0 / 7, 2.0 / 7, 0.0});
  r = ops::topp_route(s, 0.4, 3, RouteWeights::TopKSoftmax);  // one expert, renormalised to 1
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, -1, -1}));
  near(r.weights, {1.0, 0.0, 0.0});
  r = ops::topp_route(s, 1.0, 3, RouteWeights::FullSoftmax);  // never exceeds 1: capped at max_k
  EXPECT_EQ(r.indices.to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 3}));
  // group_l2norm: [3, 4 | 0, 0] -> [5, 0], gradient 0 at the zero group
  Tensor h = from_vector<double>({3, 4, 0, 0}, {1, 4}).requires_grad_();
  const Tensor nrm = ops::group_l2norm(h, 2);
  near(nrm, {5.0, 0.0});
  ops::sum(nrm).backward();
  near(h.grad(), {0.6, 0.8, 0.0, 0.0});
  // z-loss: logits [0, 0] -> lse = log 2
  near(ops::router_z_loss(zeros({3, 2}, kF64)), {std::log(2.0) * std::log(2.0)});
  // load balance: every pair to expert 0; P = [0.625, 0.375] -> 2 * 1 * 0.625
  near(ops::load_balance_loss(from_vector<double>({0.75, 0.25, 0.5, 0.5}, {2, 2}), idx({0, 0}, {2, 1})), {1.25});
}

// A bfloat16 h with float32 norms is read as it is: the norms and the gradient (rounded once to bfloat16) are the bits
// of the composed group_l2norm(h.to(float32)), for groups of 1, odd and wide (over one 256-element block) widths,
// with a zero group (gradient 0 there).
TEST(GroupL2Norm, BFloat16WithFloatNormsIsTheComposedMath) {
  Generator gen(40);
  for (int64_t r : {1, 7, 64, 300}) {
    const int64_t rows = 37, groups = 3;
    const Tensor h = randn({rows, groups * r}, {}, &gen).to(DType::BFloat16);
    h.narrow(1, r, r).narrow(0, 5, 1).fill_(0.0);  // row 5's middle group: norm 0
    const Tensor dnorm = randn({rows, groups}, {}, &gen);
    const Tensor fused_in = h.detach().requires_grad_(), composed_in = h.detach().requires_grad_();
    const Tensor fused = ops::group_l2norm(fused_in, groups, DType::Float32);
    const Tensor composed = ops::group_l2norm(composed_in.to(DType::Float32), groups);
    ASSERT_EQ(fused.dtype(), DType::Float32);
    EXPECT_EQ(fused.to_vector<float>(), composed.to_vector<float>()) << "r=" << r;
    ops::sum(fused * dnorm).backward();
    ops::sum(composed * dnorm).backward();
    ASSERT_EQ(fused_in.grad().dtype(), DType::BFloat16);
    const std::vector<float> gf = fused_in.grad().to_vector<float>(), gc = composed_in.grad().to_vector<float>();
    EXPECT_EQ(gf, gc) << "r=" << r;
    EXPECT_EQ(gf[size_t(5 * groups * r + r)], 0.0f);
  }
  expect_error([] { ops::group_l2norm(zeros({2, 4}), 2, DType::Int64); },
               {"[group_l2norm] norm_dtype must be a floating dtype", "int64"});
}

TEST(MoeLoadBalance, ExactlyOneWhenUniform) {
  for (int64_t n : {4, 8}) {
    const int64_t T = 16, K = 2;
    std::vector<int64_t> s;
    for (int64_t t = 0; t < T; ++t) s.push_back(t % n), s.push_back((t + 1) % n);
    for (DType dt : {DType::Float32, DType::Float64}) {
      const Tensor probs = full({T, n}, 1.0 / double(n), TensorOptions{}.with_dtype(dt));
      EXPECT_EQ(ops::load_balance_loss(probs, idx(s, {T, K})).item<double>(), 1.0) << "n = " << n;
    }
  }
  // empty slots do not count: the non-empty pairs are still balanced
  EXPECT_EQ(ops::load_balance_loss(full({4, 4}, 0.25), idx({0, -1, 1, -1, 2, -1, 3, -1}, {4, 2})).item<double>(), 1.0);
}

// bfloat16 inputs are reduced in float32 (expert counts past 256 are not integers in bfloat16): the losses equal
// the float32 ones up to the output rounding (reduced in bfloat16 they were off by 0.48% and 0.42% here).
TEST(MoeAuxLosses, ReducedFloatInputsAreReducedInFloat32) {
  const int64_t T = 3000, n = 4;
  const Tensor logits = random_double({T, n}, 9) * 2.0;
  std::vector<int64_t> s;
  for (int64_t t = 0; t < T; ++t) s.push_back(t % 7 == 0 ? 1 : t % 3);  // uneven counts of about 1000
  const Tensor bf_logits = logits.to(DType::BFloat16), f_logits = bf_logits.to(DType::Float32);
  const double lb_f = ops::load_balance_loss(ops::softmax(f_logits, -1), idx(s, {T, 1})).item<double>();
  const Tensor lb_bf = ops::load_balance_loss(ops::softmax(f_logits, -1).to(DType::BFloat16), idx(s, {T, 1}));
  EXPECT_EQ(lb_bf.dtype(), DType::BFloat16);
  EXPECT_NEAR(lb_bf.item<double>(), lb_f, 2.5e-3 * lb_f);  // the output rounding (2^-9) and a little
  const double z_f = ops::router_z_loss(f_logits).item<double>();
  EXPECT_NEAR(ops::router_z_loss(bf_logits).item<double>(), z_f, 2.5e-3 * z_f);  // bf16 sums: 4e-3 off
}

// A GPU runs an unaligned expert range [r0, r1) as neurons [0, Rp) of zero-padded copies: same output, same
// gradients (the padding's are dropped), with a separate gate input too.
TEST(MoeExpertFfn, PaddedNeuronRangeGivesTheSameOutputAndGradients) {
  const int64_t T = 7, n = 4, K = 2, d = 6, dg = 5, D = 14, r0 = 3, r1 = 14;
  const Tensor indices = idx({0, 1, 2, 3, 1, -1, 3, 0, 2, 2, 1, 0, 3, 1}, {T, K});
  const Tensor dy = random_double({T, d}, 7);
  // fresh leaves (the same values each time): x, gate input [T, n, dg], weights, W_gate, W_up, W_down
  auto run = [&](bool padded, Tensor& y) {
    std::vector<Tensor> in;
    for (const Shape& shape : {Shape{T, d}, Shape{T, n, dg}, Shape{T, K}, Shape{n, dg, D}, Shape{n, d, D}, Shape{n, D, d}})
      in.push_back(random_double(shape, in.size() + 1).requires_grad_());
    if (padded) {
      const auto [wg, wu, wd] = ops::padded_neuron_range(in[3], in[4], in[5], r0, r1, 8);
      EXPECT_EQ(wg.shape(), (Shape{n, dg, 16}));
      EXPECT_EQ(wd.shape(), (Shape{n, 16, d}));
      y = ops::expert_ffn(in[0], indices, in[2], wg, wu, wd, 0, 16, in[1]);
    } else {
      y = ops::expert_ffn(in[0], indices, in[2], in[3], in[4], in[5], r0, r1, in[1]);
    }
    ops::sum(y * dy).backward();
    std::vector<Tensor> grads;
    for (const Tensor& t : in) grads.push_back(t.grad());
    return grads;
  };
  Tensor y, y_padded;
  const std::vector<Tensor> expected = run(false, y), got = run(true, y_padded);
  EXPECT_LT(max_abs_diff(y_padded, y), 1e-12);
  const char* names[] = {"x", "gate input", "weights", "w_gate", "w_up", "w_down"};
  for (size_t i = 0; i < got.size(); ++i) EXPECT_LT(max_abs_diff(got[i], expected[i]), 1e-12) << names[i];
  // an aligned range is a plain copy of the slice
  EXPECT_EQ(ops::padded_neuron_range(zeros({n, dg, D}), zeros({n, d, D}), zeros({n, D, d}), 0, 8, 8)[1].shape(),
            (Shape{n, d, 8}));
}

TEST(MoeExpertFfn, EmptyRangeAndReducedPrecision) {
  const Tensor x = random_double({5, 4}, 1).requires_grad_(), w = random_double({5, 2}, 2).requires_grad_();
  const Tensor wg = random_double({3, 4, 6}, 3).requires_grad_(), wu = random_double({3, 4, 6}, 4).requires_grad_(),
               wd = random_double({3, 6, 4}, 5).requires_grad_();
  const Tensor I = idx({0, 1, 2, -1, 1, 1, 0, 2, -1, -1}, {5, 2});
  const Tensor y = ops::expert_ffn(x, I, w, wg, wu, wd, 3, 3);  // no neurons: y = 0, all gradients 0
  ops::sum(y * random_double({5, 4}, 6)).backward();
  for (const Tensor& t : {y, x.grad(), w.grad(), wg.grad(), wu.grad(), wd.grad()})
    EXPECT_EQ(max_abs_diff(t, zeros_like(t)), 0.0);
  // bf16 computes in float32: close to the float64 result, gradients come back in bf16
  const auto bf = [](const Tensor& t) { return t.detach().to(DType::BFloat16); };
  const Tensor xb = bf(x).requires_grad_(), wgb = bf(wg).requires_grad_();
  const Tensor yb = ops::expert_ffn(xb, I, bf(w), wgb, bf(wu), bf(wd), 1, 6);
  EXPECT_EQ(yb.dtype(), DType::BFloat16);
  const Tensor yr = ops::expert_ffn(bf(x).to(DType::Float64), I, bf(w).to(DType::Float64), bf(wg).to(DType::Float64),
                                    bf(wu).to(DType::Float64), bf(wd).to(DType::Float64), 1, 6);
  EXPECT_LT(max_abs_diff(yb, yr), 0.1);
  ops::sum(yb).backward();
  EXPECT_EQ(xb.grad().dtype(), DType::BFloat16);
  EXPECT_EQ(wgb.grad().dtype(), DType::BFloat16);
}

// ---------------------------------------------------------------------------------------------------------
// Bit-identical results for 1 and 2 OpenMP threads (float32, sizes that take the parallel paths).
std::vector<std::vector<float>> run_all(bool with_gate, int64_t n) {
  const int64_t T = 1024, d = 128, K = 2, D = 256, dg = 48;
  Generator g(11);
  auto rnd = [&](Shape s, double scale) { return (randn(s, {}, &g) * scale).detach().requires_grad_(); };
  Tensor scores = rnd({T, n}, 1.0), x = rnd({T, d}, 1.0), wg = rnd({n, with_gate ? dg : d, D}, 0.1),
         wu = rnd({n, d, D}, 0.1), wd = rnd({n, D, d}, 0.1), gate = with_gate ? rnd({T, n, dg}, 1.0) : Tensor();
  const ops::Route r = ops::topk_route(scores, K, RouteWeights::TopKSoftmax);
  const ops::Route p = ops::topp_route(scores, 0.5, K, RouteWeights::FullSoftmax);
  const Tensor y = ops::expert_ffn(x, r.indices, r.weights, wg, wu, wd, 32, D, gate);
  const Tensor loss = ops::sum(y * y) + ops::sum(p.weights) + ops::router_z_loss(scores) +
                      ops::load_balance_loss(ops::softmax(scores, -1), r.indices) + ops::sum(ops::group_l2norm(x, 8));
  loss.backward();
  std::vector<std::vector<float>> out{
      y.to_vector<float>(),         x.grad().to_vector<float>(),  scores.grad().to_vector<float>(),
      wg.grad().to_vector<float>(), wu.grad().to_vector<float>(), wd.grad().to_vector<float>()};
  if (with_gate) out.push_back(gate.grad().to_vector<float>());
  return out;
}

// n = 8 on 2 threads runs experts in parallel, n = 4 threads each GEMM; 1 thread runs everything serially.
TEST(MoeDeterminism, ThreadCountIndependent) {
  const int saved = omp_get_max_threads();
  for (int64_t n : {4, 8})
    for (bool with_gate : {false, true}) {
      omp_set_num_threads(1);
      const auto one = run_all(with_gate, n);
      omp_set_num_threads(2);
      const auto two = run_all(with_gate, n);
      omp_set_num_threads(saved);
      ASSERT_EQ(one.size(), two.size());
      for (size_t i = 0; i < one.size(); ++i) {
        ASSERT_EQ(one[i].size(), two[i].size());
        EXPECT_EQ(std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(float)), 0)
            << "output " << i << ", n = " << n << (with_gate ? ", gate_input" : "");
      }
    }
}

// ---------------------------------------------------------------------------------------------------------
using testing::expect_error;

// A call of expert_ffn (gate_input optional) to hand to expect_error.
std::function<void()> ffn(Tensor x, Tensor i, Tensor w, Tensor wg, Tensor wu, Tensor wd, int64_t r0, int64_t r1,
                          Tensor gate = Tensor()) {
  return [=] { ops::expert_ffn(x, i, w, wg, wu, wd, r0, r1, gate); };
}

std::function<void()> route(int64_t k, Shape s, DType dt = DType::Float32, double p = -1.0) {
  return [=] {
    const Tensor sc = zeros(s, TensorOptions{}.with_dtype(dt));
    if (p < 0)
      ops::topk_route(sc, k, RouteWeights::TopKSoftmax);
    else
      ops::topp_route(sc, p, k, RouteWeights::FullSoftmax);
  };
}

TEST(MoeBadInput, ExpertFfn) {
  const Tensor x = zeros({8, 16}), w = zeros({8, 2}), I = zeros({8, 2}, kI64);
  const Tensor wg = zeros({4, 16, 32}), wu = zeros({4, 16, 32}), wd = zeros({4, 32, 16});
  expect_error(ffn(x, I, w, wg, zeros({4, 12, 32}), wd, 0, 32),
               {"[expert_ffn] x is [T, d] = [8, 16] but W_up is [4, 12, 32]: W_up's dim 1 must equal d (16)",
                "indices [8, 2]", "W_down [4, 32, 16]"});
  expect_error(ffn(x, I, w, zeros({4, 16, 30}), wu, wd, 0, 32),
               {"[expert_ffn]", "W_gate is [4, 16, 30]", "[4, 16, 32]"});
  expect_error(ffn(x, I, w, wg, wu, zeros({3, 32, 16}), 0, 32), {"[expert_ffn]", "W_down is [3, 32, 16]"});
  expect_error(ffn(x, I, zeros({8, 3}), wg, wu, wd, 0, 32), {"[expert_ffn]", "weights is [8, 3]"});
  expect_error(ffn(x, zeros({7, 2}, kI64), zeros({7, 2}), wg, wu, wd, 0, 32), {"[expert_ffn]", "indices is [7, 2]"});
  expect_error(ffn(x, I, w, wg, wu, wd, 4, 33), {"[expert_ffn] neuron range [r0, r1) = [4, 33)", "D = 32"});
  expect_error(ffn(x, I, w, wg, wu, wd, 5, 4), {"[expert_ffn] neuron range"});
  expect_error(ffn(x, I, w, zeros({4, 5, 32}), wu, wd, 0, 32, zeros({8, 3, 5})),
               {"[expert_ffn]", "gate_input is [8, 3, 5]", "[8, 4, d_g]", "or [T, 1, d_g] = [8, 1, d_g]"});
  expect_error(ffn(x, I, w, wg, wu, wd, 0, 32, zeros({8, 4, 5})),
               {"[expert_ffn]", "W_gate is [4, 16, 32]", "[4, 5, 32]"});
  expect_error(ffn(x, I, w.to(DType::Float64), wg, wu, wd, 0, 32), {"[expert_ffn]", "dtypes differ"});
  expect_error(ffn(x, zeros({8, 2}), w, wg, wu, wd, 0, 32), {"[expert_ffn]", "int32 or int64"});
  Tensor bad = zeros({8, 2}, kI64);
  bad.data_ptr<int64_t>()[7] = 4;
  expect_error(ffn(x, bad, w, wg, wu, wd, 0, 32), {"[expert_ffn] indices[3, 1] = 4 is out of range", "[0, 4)"});
  bad.data_ptr<int64_t>()[7] = -2;
  expect_error(ffn(x, bad, w, wg, wu, wd, 0, 32), {"indices[3, 1] = -2"});
}

TEST(MoeBadInput, RoutingAndLosses) {
  expect_error(route(4, {4, 3}), {"[topk_route]", "[4, 3]", "k = 4"});
  expect_error(route(0, {4, 3}), {"[topk_route]", "k = 0"});
  expect_error(route(1, {4}), {"[topk_route]", "[T, n]", "[4]"});
  expect_error(route(1, {4, 3}, DType::Int64), {"[topk_route]", "floating"});
  expect_error(route(2, {4, 3}, DType::Float32, 1.5), {"[topp_route] p = 1.5"});
  expect_error(route(5, {4, 3}, DType::Float32, 0.5), {"[topp_route]", "max_k = 5"});
  expect_error([] { ops::group_l2norm(zeros({4, 10}), 3); }, {"[group_l2norm] h is [4, 10]", "groups = 3"});
  expect_error(
      [] {
        ops::load_balance_loss(zeros({4, 3}), idx({0, 1, 2, 3}, {4, 1}));
      },
      {"[load_balance_loss] indices[3, 0] = 3 is out of range", "probs [4, 3]"});
  expect_error(
      [] {
        ops::load_balance_loss(zeros({4, 3}), idx({0, 1, 2}, {3, 1}));
      },
      {"[load_balance_loss]", "[4, 3]", "[3, 1]"});
  expect_error([] { ops::router_z_loss(zeros({}, kI64)); }, {"[router_z_loss]"});
}

}  // namespace
}  // namespace uoe::testing
