// CPU bfloat16 rowwise ops (softmax, log_softmax, rms_norm, layer_norm, cross_entropy), which read and write
// bfloat16 rows without float32 copies: forward and backward give the float32 ops' results on the same values
// (outputs rounded once to bfloat16, within bfloat16 rounding for the gradients), and gradients stay bfloat16.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe::testing {
namespace {

using V = std::vector<Tensor>;

// Runs f on bfloat16 leaves and on float32 leaves holding the same values. The output equals the float32 output
// cast to the bfloat16 output's dtype (bit for bit: the same float32 arithmetic, one rounding); each gradient,
// from the same output gradient, is bfloat16 and within `tol` of the float32 one relative to its largest magnitude.
void expect_bf16_is_rounded_f32(const std::vector<Shape>& shapes, const std::function<Tensor(const V&)>& f,
                                double tol) {
  Generator g(23);
  V b16, f32;
  for (const Shape& s : shapes) {
    const Tensor v = (randn(s, {}, &g) * 2.0).to(DType::BFloat16);
    b16.push_back(v.detach().requires_grad_());
    f32.push_back(v.to(DType::Float32).detach().requires_grad_());
  }
  const Tensor yb = f(b16), yf = f(f32);
  EXPECT_EQ(max_abs_diff(yb.to(DType::Float32), yf.to(yb.dtype()).to(DType::Float32)), 0.0) << "output";
  const Tensor dy = randn(yf.shape(), {}, &g).to(yb.dtype());
  yb.backward(dy);
  yf.backward(dy.to(DType::Float32));
  for (size_t i = 0; i < b16.size(); ++i) {
    const Tensor gb = b16[i].grad(), gf = f32[i].grad();
    ASSERT_TRUE(gb.defined()) << "input " << i;
    EXPECT_EQ(gb.dtype(), DType::BFloat16) << "input " << i;
    const double scale = ops::max(ops::abs(gf)).item<float>() + 1e-6;
    EXPECT_LE(max_abs_diff(gb.to(DType::Float32), gf) / scale, tol) << "gradient of input " << i;
  }
}

TEST(CpuBf16RowwiseOps, SoftmaxAndLogSoftmax) {
  for (int64_t dim : {-1, 0}) {
    expect_bf16_is_rounded_f32({{6, 33}}, [dim](const V& x) { return ops::softmax(x[0], dim); }, 1e-2);
    expect_bf16_is_rounded_f32({{2, 5, 17}}, [dim](const V& x) { return ops::log_softmax(x[0], dim); }, 1e-2);
  }
}

TEST(CpuBf16RowwiseOps, RmsNormAndLayerNorm) {
  expect_bf16_is_rounded_f32({{2, 7, 33}, {33}}, [](const V& x) { return ops::rms_norm(x[0], x[1], 1e-5); }, 1e-2);
  expect_bf16_is_rounded_f32({{5, 16}}, [](const V& x) { return ops::rms_norm(x[0], Tensor(), 1e-5); }, 1e-2);
  expect_bf16_is_rounded_f32({{3, 4, 129}, {129}, {129}},
                             [](const V& x) { return ops::layer_norm(x[0], x[1], x[2], 1e-5); }, 1e-2);
  expect_bf16_is_rounded_f32({{9, 15}}, [](const V& x) { return ops::layer_norm(x[0], Tensor(), Tensor(), 1e-5); },
                             1e-2);
}

TEST(CpuBf16RowwiseOps, CrossEntropyReadsBf16LogitsAndGivesBf16Gradients) {
  const Tensor targets = from_vector(std::vector<int64_t>{3, -100, 0, 255, 17, 9}, {2, 3},
                                     TensorOptions{}.with_dtype(DType::Int64));
  expect_bf16_is_rounded_f32({{2, 3, 256}}, [&](const V& x) {
    const Tensor loss = ops::cross_entropy(x[0], targets);
    EXPECT_EQ(loss.dtype(), DType::Float32);  // the loss in float32 whatever the logits' dtype
    return loss;
  }, 1e-2);
}

}  // namespace
}  // namespace uoe::testing
