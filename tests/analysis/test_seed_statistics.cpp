// Seed statistics of uoe compare: the Student-t quantiles against published table values, and the summaries and
// paired differences against the arithmetic done here.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/seed_statistics.h"
#include "gradcheck.h"

namespace uoe::analysis {
namespace {

TEST(SeedStatistics, StudentTQuantilesMatchTheTables) {
  // t_{0.975, dof} as printed in statistics tables (3 decimals), and the normal limit
  const std::pair<double, double> table[] = {{1, 12.706}, {2, 4.303}, {3, 3.182}, {4, 2.776}, {9, 2.262},
                                             {29, 2.045}, {1000, 1.962}};
  for (const auto& [dof, t] : table) EXPECT_NEAR(student_t_quantile(0.975, dof), t, 5e-4) << dof;
  EXPECT_NEAR(student_t_quantile(0.95, 5), 2.015, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.025, 4), -2.776, 5e-4);
  EXPECT_NEAR(student_t_quantile(0.5, 3), 0.0, 1e-9);
  testing::expect_error([] { student_t_quantile(1.0, 3); }, {"[student_t_quantile] p must lie in (0, 1)"});
}

TEST(SeedStatistics, SummariesAndPairedDifferencesRecomputed) {
  const std::vector<double> reference = {2.10, 2.30, 2.05}, variant = {2.00, 2.25, 2.02};
  const SeedSummary s = summarize_seeds(variant);
  const double mean = (2.00 + 2.25 + 2.02) / 3;
  EXPECT_NEAR(s.mean, mean, 1e-12);
  const double var = (std::pow(2.00 - mean, 2) + std::pow(2.25 - mean, 2) + std::pow(2.02 - mean, 2)) / 2;
  EXPECT_NEAR(s.std, std::sqrt(var), 1e-12);
  EXPECT_EQ(s.n, 3);
  // d = (-0.10, -0.05, -0.03): mean -0.06, sd 0.0360555, 95% half-width t_{0.975,2} · sd / √3 = 4.303 · 0.0208167
  const PairedDifference d = paired_difference(variant, reference);
  EXPECT_NEAR(d.mean, -0.06, 1e-12);
  const double sd = std::sqrt((0.04 * 0.04 + 0.01 * 0.01 + 0.03 * 0.03) / 2);
  EXPECT_NEAR(d.half_width, 4.302653 * sd / std::sqrt(3.0), 1e-6);
  EXPECT_EQ(d.n, 3);
  // a variant against itself: no difference, no spread
  const PairedDifference self = paired_difference(reference, reference);
  EXPECT_EQ(self.mean, 0.0);
  EXPECT_EQ(self.half_width, 0.0);
}

TEST(SeedStatistics, OneSeedHasNoSpreadAndUnpairedSeedsAreRefused) {
  EXPECT_TRUE(std::isnan(summarize_seeds({2.5}).std));
  const PairedDifference d = paired_difference({2.5}, {2.7});
  EXPECT_NEAR(d.mean, -0.2, 1e-12);
  EXPECT_TRUE(std::isnan(d.half_width));
  testing::expect_error([] { paired_difference({1, 2}, {1}); }, {"needs the same seeds for both"});
  testing::expect_error([] { summarize_seeds({}); }, {"[summarize_seeds] no values"});
}

}  // namespace
}  // namespace uoe::analysis
