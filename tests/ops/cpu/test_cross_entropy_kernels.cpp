// The CPU cross-entropy helpers of the op (ops/kernels/rowwise.h, in ops/cpu/rowwise_kernels.cpp): the reporting target check, the mean loss, the
// per-row scale and bfloat16 logits, against the float32 kernels they build on; and the backward of rows longer
// than the pieces the kernel works in, against the formula.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/half.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/kernels/rowwise.h"

namespace uoe {
namespace {

constexpr int64_t kRows = 5, kVocab = 37, kIgnore = -100;

std::vector<float> random_logits(uint64_t seed) {
  Generator g(seed);
  return randn({kRows, kVocab}, {}, &g).to_vector<float>();
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(CrossEntropyKernels, CheckedForwardCountsAndMatchesTheThrowingOne) {
  const std::vector<float> x = random_logits(1);
  const std::vector<int64_t> t = {3, kIgnore, 0, 36, kIgnore};
  std::vector<float> loss(kRows), lse(kRows), want_loss(kRows), want_lse(kRows);
  const cpu::TargetCheck c = cpu::cross_entropy_forward_checked(kRows, kVocab, x.data(), t.data(), kIgnore,
                                                                loss.data(), lse.data());
  EXPECT_EQ(c.count, 3);
  EXPECT_EQ(c.bad_row, -1);
  cpu::cross_entropy_forward(kRows, kVocab, x.data(), t.data(), kIgnore, want_loss.data(), want_lse.data());
  EXPECT_TRUE(same_bits(loss, want_loss));
  EXPECT_TRUE(same_bits(lse, want_lse));
}

TEST(CrossEntropyKernels, CheckedForwardReportsTheFirstBadTargetAndWritesNothing) {
  const std::vector<float> x = random_logits(2);
  const std::vector<int64_t> t = {3, kIgnore, kVocab, -1, 0};
  std::vector<float> loss(kRows, -7.0f), lse(kRows, -7.0f);
  const cpu::TargetCheck c = cpu::cross_entropy_forward_checked(kRows, kVocab, x.data(), t.data(), kIgnore,
                                                                loss.data(), lse.data());
  EXPECT_EQ(c.bad_row, 2);
  EXPECT_EQ(c.bad_target, kVocab);
  for (int64_t r = 0; r < kRows; ++r) {
    EXPECT_EQ(loss[size_t(r)], -7.0f);
    EXPECT_EQ(lse[size_t(r)], -7.0f);
  }
}

TEST(CrossEntropyKernels, MeanLossAndRowScale) {
  const std::vector<double> per_row = {0.5, 1.25, 0.0, 2.0};
  double loss = -1;
  cpu::cross_entropy_mean_loss(4, per_row.data(), 3, &loss);
  EXPECT_EQ(loss, 3.75 / 3.0);
  cpu::cross_entropy_mean_loss(4, per_row.data(), 0, &loss);
  EXPECT_EQ(loss, 0.0);  // no counted target

  const float g = 3.0f;
  std::vector<float> scale(4, -1.0f);
  cpu::cross_entropy_row_scale(4, &g, 2, scale.data());
  EXPECT_EQ(scale, std::vector<float>(4, 1.5f));
  cpu::cross_entropy_row_scale(4, &g, 0, scale.data());
  EXPECT_EQ(scale, std::vector<float>(4, 0.0f));
}

TEST(CrossEntropyKernels, Bfloat16LogitsAreTheFloat32KernelsOnWidenedValues) {
  const std::vector<float> x = random_logits(3);
  std::vector<BFloat16> x16(x.size());
  convert_f32_to_bf16(x.data(), x16.data(), int64_t(x.size()));
  std::vector<float> wide(x.size());
  convert_bf16_to_f32(x16.data(), wide.data(), int64_t(x.size()));
  const std::vector<int64_t> t = {1, kIgnore, 7, 0, 36};
  const std::vector<float> scale = {0.5f, 0.5f, -2.0f, 1.0f, 0.25f};

  std::vector<float> loss(kRows), lse(kRows), want_loss(kRows), want_lse(kRows);
  const cpu::TargetCheck c = cpu::cross_entropy_forward_checked(kRows, kVocab, x16.data(), t.data(), kIgnore,
                                                                loss.data(), lse.data());
  EXPECT_EQ(c.count, 4);
  cpu::cross_entropy_forward(kRows, kVocab, wide.data(), t.data(), kIgnore, want_loss.data(), want_lse.data());
  EXPECT_TRUE(same_bits(loss, want_loss));
  EXPECT_TRUE(same_bits(lse, want_lse));

  std::vector<BFloat16> d16(x.size());
  std::vector<float> d(x.size()), want_d(x.size());
  cpu::cross_entropy_backward(kRows, kVocab, x16.data(), t.data(), kIgnore, lse.data(), scale.data(), d16.data());
  convert_bf16_to_f32(d16.data(), d.data(), int64_t(d.size()));
  cpu::cross_entropy_backward(kRows, kVocab, wide.data(), t.data(), kIgnore, lse.data(), scale.data(), want_d.data());
  std::vector<BFloat16> want16(x.size());
  convert_f32_to_bf16(want_d.data(), want16.data(), int64_t(want_d.size()));
  convert_bf16_to_f32(want16.data(), want_d.data(), int64_t(want_d.size()));
  EXPECT_TRUE(same_bits(d, want_d));
}

// The backward goes through a row in pieces of 4096 columns: targets at a piece's first and last column, in the
// last (shorter) piece and in the first, against (softmax - onehot) * scale in float64, in float32 and bfloat16.
TEST(CrossEntropyKernels, BackwardOfLongRowsIsSoftmaxMinusOneHot) {
  const int64_t rows = 6, v = 9000;
  Generator g(5);
  const std::vector<float> x = (randn({rows, v}, {}, &g) * 3.0).to_vector<float>();
  const std::vector<int64_t> t = {0, 4095, 4096, 8999, 6000, kIgnore};
  const std::vector<float> scale = {0.5f, -1.0f, 2.0f, 0.25f, 1.0f, 3.0f};
  std::vector<float> loss(rows), lse(rows), d(x.size());
  cpu::cross_entropy_forward(rows, v, x.data(), t.data(), kIgnore, loss.data(), lse.data());
  cpu::cross_entropy_backward(rows, v, x.data(), t.data(), kIgnore, lse.data(), scale.data(), d.data());
  std::vector<BFloat16> x16(x.size()), d16(x.size());
  convert_f32_to_bf16(x.data(), x16.data(), int64_t(x.size()));
  cpu::cross_entropy_backward(rows, v, x16.data(), t.data(), kIgnore, lse.data(), scale.data(), d16.data());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(double(x[size_t(r * v + j)]));
    for (int64_t j = 0; j < v; ++j) {
      const size_t i = size_t(r * v + j);
      const double p = std::exp(double(x[i])) / sum, s = scale[size_t(r)];
      const double want = t[size_t(r)] == kIgnore ? 0.0 : (p - (j == t[size_t(r)] ? 1.0 : 0.0)) * s;
      ASSERT_NEAR(d[i], want, 1e-6 * std::abs(s)) << "row " << r << " column " << j;
      const double p16 = std::exp(double(float(x16[i])) - double(lse[size_t(r)]));  // the widened logit
      const double want16 = t[size_t(r)] == kIgnore ? 0.0 : (p16 - (j == t[size_t(r)] ? 1.0 : 0.0)) * s;
      ASSERT_NEAR(float(d16[i]), want16, 1e-6 * std::abs(s) + std::abs(want16) / 128) << "bf16 row " << r << " column " << j;
    }
  }
}

}  // namespace
}  // namespace uoe
