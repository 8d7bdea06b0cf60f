// Seed statistics of uoe compare: summaries, paired differences and Student-t quantiles.
#include "analysis/seed_statistics.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"

namespace uoe::analysis {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// The density of Student's t with `dof` degrees of freedom at t.
double t_density(double t, double dof) {
  const double log_norm = std::lgamma((dof + 1) / 2) - std::lgamma(dof / 2) - 0.5 * std::log(dof * M_PI);
  return std::exp(log_norm - (dof + 1) / 2 * std::log1p(t * t / dof));
}

// P(T <= x) for x >= 0: 1/2 plus the density integrated over [0, x] (Simpson's rule, 2000 intervals; the density
// is smooth and bounded there).
double t_cdf(double x, double dof) {
  constexpr int kIntervals = 2000;
  const double h = x / kIntervals;
  double sum = t_density(0, dof) + t_density(x, dof);
  for (int i = 1; i < kIntervals; ++i) sum += (i % 2 ? 4 : 2) * t_density(i * h, dof);
  return 0.5 + sum * h / 3;
}

}  // namespace

SeedSummary summarize_seeds(const std::vector<double>& values) {
  UOE_CHECK(!values.empty(), "[summarize_seeds] no values");
  SeedSummary s;
  s.n = int(values.size());
  for (double v : values) s.mean += v / s.n;
  if (s.n < 2) {
    s.std = kNaN;
    return s;
  }
  double squares = 0;
  for (double v : values) squares += (v - s.mean) * (v - s.mean);
  s.std = std::sqrt(squares / (s.n - 1));
  return s;
}

PairedDifference paired_difference(const std::vector<double>& variant, const std::vector<double>& reference) {
  UOE_CHECK(variant.size() == reference.size(), "[paired_difference] ", variant.size(), " values against ",
            reference.size(), ": a paired difference needs the same seeds for both");
  std::vector<double> d;
  for (size_t i = 0; i < variant.size(); ++i) d.push_back(variant[i] - reference[i]);
  const SeedSummary s = summarize_seeds(d);
  const double half = s.n < 2 ? kNaN : student_t_quantile(0.975, s.n - 1) * s.std / std::sqrt(double(s.n));
  return {s.mean, half, s.n};
}

double student_t_quantile(double p, double dof) {
  UOE_CHECK(p > 0 && p < 1 && dof > 0, "[student_t_quantile] p must lie in (0, 1) and dof be > 0, got p ", p,
            " and dof ", dof);
  if (p < 0.5) return -student_t_quantile(1 - p, dof);
  double lo = 0, hi = 1;
  while (t_cdf(hi, dof) < p) hi *= 2;  // the t quantiles of 1 degree of freedom grow like 1 / (1 - p)
  while (hi - lo > 1e-9 * std::max(1.0, hi)) {
    const double mid = (lo + hi) / 2;
    (t_cdf(mid, dof) < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

}  // namespace uoe::analysis
