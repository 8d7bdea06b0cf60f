// Statistics over the seeds of a comparison (uoe compare): mean and sample standard deviation of one variant, and
// the paired difference of two variants run on the same seeds with its 95% Student-t interval.
#pragma once
#include <vector>

namespace uoe::analysis {

// Mean and sample standard deviation (n - 1 in the denominator) of the values; std is NaN for one value.
struct SeedSummary {
  double mean = 0, std = 0;
  int n = 0;
};
SeedSummary summarize_seeds(const std::vector<double>& values);

// d_s = variant_s - reference_s over the seeds s (the same seed for both); mean of d and the half-width of its
// two-sided 95% interval, t_{0.975, n-1} · sd(d) / √n (NaN for one seed: no interval).
struct PairedDifference {
  double mean = 0, half_width = 0;
  int n = 0;
};
PairedDifference paired_difference(const std::vector<double>& variant, const std::vector<double>& reference);

// The p-quantile of Student's t distribution with `dof` > 0 degrees of freedom, p in (0, 1): the CDF, from
// Simpson's rule on the density, inverted by bisection (to 1e-9).
double student_t_quantile(double p, double dof);

}  // namespace uoe::analysis
