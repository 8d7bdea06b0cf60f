// Fused ops equal the same math composed of primitive ops, in the forward output and in every gradient (float64).
#include <gtest/gtest.h>

#include <cmath>

#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe {
namespace {

using testing::max_abs_diff;
using testing::random_double;


Tensor causal_mask_bias(int64_t T, const Tensor& like) {
  std::vector<double> m(size_t(T * T));
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) m[size_t(i * T + j)] = j <= i ? 0.0 : -1e30;
  return from_vector(m, {T, T}, TensorOptions{}.with_dtype(like.dtype()));
}

TEST(FusedVsComposed, CausalAttention) {
  for (int64_t T : {1, 7, 70}) {
    testing::expect_fused_equals_composed(
        {{2, 3, T, 8}, {2, 3, T, 8}, {2, 3, T, 8}},
        [](const auto& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], true); },
        [T](const auto& x) {
          const Tensor s = ops::matmul(x[0], x[1].mT()) / std::sqrt(8.0) + causal_mask_bias(T, x[0]);  // [B,H,T,T]
          return ops::matmul(ops::softmax(s, -1), x[2]);
        });
  }
}

TEST(FusedVsComposed, GroupedQueryAttention) {
  testing::expect_fused_equals_composed(
      {{1, 4, 9, 4}, {1, 2, 9, 4}, {1, 2, 9, 4}},
      [](const auto& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], false); },
      [](const auto& x) {
        // each kv head serves two consecutive q heads
        const Tensor k = x[1].unsqueeze(2).expand({1, 2, 2, 9, 4}).reshape({1, 4, 9, 4});
        const Tensor v = x[2].unsqueeze(2).expand({1, 2, 2, 9, 4}).reshape({1, 4, 9, 4});
        return ops::matmul(ops::softmax(ops::matmul(x[0], k.mT()) * 0.5, -1), v);
      });
}

TEST(FusedVsComposed, CrossEntropy) {
  const Tensor targets = from_vector<int64_t>({4, -100, 0, 2, 9, 1}, {6}, TensorOptions{}.with_dtype(DType::Int64));
  testing::expect_fused_equals_composed(
      {{6, 10}}, [&](const auto& x) { return ops::cross_entropy(x[0], targets); },
      [&](const auto& x) {
        const Tensor keep = from_vector<int64_t>({0, 2, 3, 4, 5}, {5}, TensorOptions{}.with_dtype(DType::Int64));
        const Tensor lp = ops::index_select(ops::log_softmax(x[0], -1), 0, keep);           // [5, 10]
        const Tensor t = ops::index_select(targets, 0, keep).unsqueeze(1);                 // [5, 1]
        return -ops::mean(ops::gather(lp, 1, t));
      });
}

TEST(FusedVsComposed, SwiGlu) {
  testing::expect_fused_equals_composed({{7, 19}, {7, 19}}, [](const auto& x) { return ops::swiglu(x[0], x[1]); },
                                        [](const auto& x) { return ops::silu(x[0]) * x[1]; });
}

// In float32 the fused kernels do the composed ops' products in their order: bit-identical output and gradients, on
// contiguous operands large enough to split over threads, on strided ones, and in odd sizes.
TEST(FusedVsComposed, SwiGluFloat32BitIdentical) {
  Generator gen(5);
  for (const Shape& s : std::vector<Shape>{{1, 1}, {3, 17}, {70, 1000}}) {
    for (bool strided : {false, true}) {
      const Shape stored = strided ? Shape{s[1], s[0]} : s;
      const Tensor g0 = randn(stored, {}, &gen) * 3.0, p0 = randn(stored, {}, &gen) * 3.0, dh = randn(s, {}, &gen);
      auto use = [&](const Tensor& t) { return strided ? t.mT() : t; };
      const Tensor gf = g0.detach().requires_grad_(), pf = p0.detach().requires_grad_();
      const Tensor gc = g0.detach().requires_grad_(), pc = p0.detach().requires_grad_();
      const Tensor fused = ops::swiglu(use(gf), use(pf)), composed = ops::silu(use(gc)) * use(pc);
      fused.backward(dh);
      composed.backward(dh);
      const std::string where = shape_str(s) + (strided ? " strided" : " contiguous");
      EXPECT_EQ(max_abs_diff(fused, composed), 0.0) << where;
      EXPECT_EQ(max_abs_diff(gf.grad(), gc.grad()), 0.0) << where;
      EXPECT_EQ(max_abs_diff(pf.grad(), pc.grad()), 0.0) << where;
    }
  }
}

TEST(FusedVsComposed, SwiGluRefusesMismatchedOperands) {
  const Tensor g = randn({4, 6}), p = randn({4, 5});
  EXPECT_THROW(
      {
        try {
          ops::swiglu(g, p);
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("[swiglu] g and p must have one shape"), std::string::npos) << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(ops::swiglu(g, g.to(DType::Float64)), Error);
  EXPECT_THROW(ops::swiglu_backward(g, g, randn({6, 4})), Error);
}

TEST(FusedVsComposed, Softmax) {
  testing::expect_fused_equals_composed({{4, 9}}, [](const auto& x) { return ops::softmax(x[0], 1); },
              [](const auto& x) {
                const Tensor e = ops::exp(x[0] - ops::max(x[0], 1, true).detach());
                return e / ops::sum(e, {1}, true);
              });
}

TEST(FusedVsComposed, RmsNorm) {
  testing::expect_fused_equals_composed({{5, 16}, {16}}, [](const auto& x) { return ops::rms_norm(x[0], x[1], 1e-6); },
              [](const auto& x) { return x[0] * ops::rsqrt(ops::mean(x[0] * x[0], {-1}, true) + 1e-6) * x[1]; });
}

TEST(FusedVsComposed, LayerNorm) {
  testing::expect_fused_equals_composed({{5, 12}, {12}, {12}}, [](const auto& x) { return ops::layer_norm(x[0], x[1], x[2], 1e-5); },
              [](const auto& x) {
                const Tensor c = x[0] - ops::mean(x[0], {-1}, true);
                return c * ops::rsqrt(ops::mean(c * c, {-1}, true) + 1e-5) * x[1] + x[2];
              });
}

TEST(FusedVsComposed, Rope) {
  testing::expect_fused_equals_composed({{2, 5, 3, 8}}, [](const auto& x) { return ops::rope(x[0], 100.0, 3); },
              [](const auto& x) {
                // angle[t, i] = (t + 3) * 100^(-2i/8); rotate halves
                std::vector<double> c, s;
                for (int t = 0; t < 5; ++t)
                  for (int i = 0; i < 4; ++i) {
                    const double a = (t + 3) * std::pow(100.0, -2.0 * i / 8);
                    c.push_back(std::cos(a));
                    s.push_back(std::sin(a));
                  }
                const auto f64 = TensorOptions{}.with_dtype(DType::Float64);
                const Tensor cs = from_vector(c, {5, 1, 4}, f64), sn = from_vector(s, {5, 1, 4}, f64);
                const Tensor x1 = x[0].narrow(-1, 0, 4), x2 = x[0].narrow(-1, 4, 4);
                return ops::cat({x1 * cs - x2 * sn, x1 * sn + x2 * cs}, -1);
              });
}

}  // namespace
}  // namespace uoe
