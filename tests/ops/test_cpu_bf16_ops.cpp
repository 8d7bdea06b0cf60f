// CPU bfloat16 ops on the bfloat16 GEMM (matmul, expert_ffn): forward and backward on bfloat16 tensors match the
// float32 ops on the same (bfloat16-rounded) values within bfloat16 rounding, and stay bfloat16 throughout.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/rng.h"
#include "gradcheck.h"
#include "ops/moe.h"
#include "ops/ops.h"

namespace uoe::testing {
namespace {

using V = std::vector<Tensor>;

// Runs f on bfloat16 leaves and on float32 leaves holding the same values; checks the outputs and every gradient
// (from the same output gradient) agree to `tol` relative to each float32 tensor's largest magnitude.
void expect_bf16_matches_f32(const std::vector<Shape>& shapes, const std::function<Tensor(const V&)>& f,
                             double tol) {
  Generator g(11);
  V b16, f32;
  for (const Shape& s : shapes) {
    const Tensor v = (randn(s, {}, &g) * 0.5).to(DType::BFloat16);
    b16.push_back(v.detach().requires_grad_());
    f32.push_back(v.to(DType::Float32).detach().requires_grad_());
  }
  const Tensor yb = f(b16), yf = f(f32);
  ASSERT_EQ(yb.dtype(), DType::BFloat16);
  const Tensor dy = randn(yf.shape(), {}, &g).to(DType::BFloat16);
  yb.backward(dy);
  yf.backward(dy.to(DType::Float32));
  auto check = [&](const Tensor& got, const Tensor& want, const std::string& what) {
    const double scale = ops::max(ops::abs(want)).item<float>() + 1e-6;
    EXPECT_LE(max_abs_diff(got.to(DType::Float32), want) / scale, tol) << what;
  };
  check(yb, yf, "output");
  for (size_t i = 0; i < b16.size(); ++i) {
    ASSERT_TRUE(b16[i].grad().defined()) << "input " << i;
    EXPECT_EQ(b16[i].grad().dtype(), DType::BFloat16) << "input " << i;
    check(b16[i].grad(), f32[i].grad(), "gradient of input " + std::to_string(i));
  }
}

TEST(CpuBf16Ops, MatmulForwardAndBackward) {
  expect_bf16_matches_f32({{33, 70}, {70, 17}}, [](const V& x) { return ops::matmul(x[0], x[1]); }, 1e-2);
  expect_bf16_matches_f32({{3, 15, 40}, {3, 40, 9}}, [](const V& x) { return ops::matmul(x[0], x[1]); }, 1e-2);
  expect_bf16_matches_f32({{2, 20, 33}, {17, 33}}, [](const V& x) { return ops::matmul(x[0], x[1].mT()); }, 1e-2);
}

TEST(CpuBf16Ops, SwiGluForwardAndBackward) {
  expect_bf16_matches_f32({{33, 70}, {33, 70}}, [](const V& x) { return ops::swiglu(x[0], x[1]); }, 1e-2);
  expect_bf16_matches_f32({{70, 1000}, {1000, 70}}, [](const V& x) { return ops::swiglu(x[0], x[1].mT()); }, 1e-2);
}

TEST(CpuBf16Ops, ExpertFfnForwardAndBackward) {
  // 40 tokens, top-2 of 5 experts of width 24, d 16; neuron ranges full and partial, with and without gate input.
  const int64_t T = 40, K = 2, n = 5, d = 16, D = 24;
  std::vector<int64_t> slots(size_t(T * K));
  for (int64_t t = 0; t < T; ++t) {
    slots[size_t(t * K)] = t % n;
    slots[size_t(t * K + 1)] = t % 7 == 0 ? -1 : (t * 3 + 1) % n;
  }
  const Tensor I = from_vector(slots, {T, K}, TensorOptions{}.with_dtype(DType::Int64));
  const std::vector<Shape> shapes = {{T, d}, {T, K}, {n, d, D}, {n, d, D}, {n, D, d}};
  for (int64_t r0 : {0, 5})
    expect_bf16_matches_f32(shapes, [&](const V& x) {
      return ops::expert_ffn(x[0], I, x[1], x[2], x[3], x[4], r0, D);
    }, 1e-2);
  expect_bf16_matches_f32({{T, d}, {T, K}, {n, 6, D}, {n, d, D}, {n, D, d}, {T, n, 6}}, [&](const V& x) {
    return ops::expert_ffn(x[0], I, x[1], x[2], x[3], x[4], 2, 20, x[5]);
  }, 1e-2);
}

// Fused attention on bfloat16 q, k, v (ops/cpu/attention_bf16.cpp): grouped-query heads, a head dim and a length
// that are not multiples of the tiles, causal and full.
TEST(CpuBf16Ops, AttentionForwardAndBackward) {
  for (bool causal : {true, false})
    expect_bf16_matches_f32({{2, 4, 70, 17}, {2, 2, 70, 17}, {2, 2, 70, 17}}, [&](const V& x) {
      return ops::scaled_dot_product_attention(x[0], x[1], x[2], causal);
    }, 1e-2);
}

// rope on bfloat16 x (ops/cpu/rope_kernels.cpp): rotated in float32 and rounded once, so within one bfloat16
// rounding (2^-8 relative to the largest element) of float32; the backward is the inverse rotation.
TEST(CpuBf16Ops, RopeForwardAndBackward) {
  expect_bf16_matches_f32({{2, 9, 3, 16}}, [](const V& x) { return ops::rope(x[0], 10000.0, 3); }, 1.0 / 256);
}

}  // namespace
}  // namespace uoe::testing
