// The CUDA MoE routing kernels (cuda/moe_routing.cuh) and expert-plan kernels (cuda/moe_plan.cuh) run unchanged on
// the CPU through the stand-in runtime of tests/cuda_emu/include, against the rules they implement: top-k picks in
// the ranking order (higher score first, ties by lower index, NaN first), top-p's cut, the routing weights and their
// backward with and without the full softmax, the group L2 norm, and the plan's stable counting sort (slot counts by
// shared-memory histogram and atomics, ranks by warp ballots over chunks of 1024 slots). The CPU-vs-CUDA parity tests
// (tests/cuda/) judge the kernels on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/moe_plan.cuh"
#include "cuda/moe_routing.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

using cuda_emu::Guarded;

// ---- routing ------------------------------------------------------------------------------------------------------
// Scores [T, n] rounded to multiples of 1/4, so that ties are common; token 3 has a NaN score.
std::vector<double> route_scores(int64_t T, int64_t n) {
  std::mt19937 rng(5);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<double> s(size_t(T * n));
  for (double& x : s) x = std::round(dist(rng) * 4) / 4;
  s[size_t(3 * n + 1)] = NAN;
  return s;
}

struct Routed {
  std::vector<int64_t> idx;
  std::vector<double> w, probs;
};

// The routing rule in double: experts ranked by score (NaN first, ties by lower index), the first K kept (top-p:
// the fewest whose probabilities add past p), weights the softmax over the kept (or over all, full_softmax).
Routed route_reference(const RouteSpec& s, const std::vector<double>& scores) {
  Routed r{std::vector<int64_t>(size_t(s.T * s.K)), std::vector<double>(size_t(s.T * s.K)),
           std::vector<double>(size_t(s.T * s.n))};
  for (int64_t t = 0; t < s.T; ++t) {
    const double* row = scores.data() + t * s.n;
    std::vector<int64_t> order(size_t(s.n));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      if (std::isnan(row[a]) != std::isnan(row[b])) return std::isnan(row[a]);
      return row[a] > row[b];
    });
    double mx = -INFINITY, z = 0;
    for (int64_t i = 0; i < s.n; ++i)
      if (!std::isnan(row[i])) mx = std::max(mx, row[i]);
    for (int64_t i = 0; i < s.n; ++i) z += std::exp(row[i] - mx);
    for (int64_t i = 0; i < s.n; ++i) r.probs[size_t(t * s.n + i)] = std::exp(row[i] - mx) / z;
    int64_t c = s.K;
    if (s.p >= 0) {
      double cum = 0;
      for (c = 0; c < s.K;) {
        cum += std::exp(row[order[size_t(c)]] - mx) / z;
        if (++c, cum > s.p) break;
      }
    }
    double zs = 0;
    for (int64_t j = 0; j < c; ++j) zs += std::exp(row[order[size_t(j)]] - mx);
    for (int64_t j = 0; j < s.K; ++j) {
      r.idx[size_t(t * s.K + j)] = j < c ? order[size_t(j)] : -1;
      r.w[size_t(t * s.K + j)] = j < c ? std::exp(row[order[size_t(j)]] - mx) / (s.full_softmax ? z : zs) : 0;
    }
  }
  return r;
}

// Equal, or within rel of each other; NaN matches NaN.
bool close(double got, double want, double rel) {
  if (std::isnan(want)) return std::isnan(got);
  return std::abs(got - want) <= rel * (1e-30 + std::abs(want));
}

template <class T>
void check_routing(const RouteSpec& s) {
  const std::string what = "T=" + std::to_string(s.T) + " n=" + std::to_string(s.n) + " K=" + std::to_string(s.K) +
                           " p=" + std::to_string(s.p) + " full_softmax=" + std::to_string(s.full_softmax);
  const double rel = sizeof(T) == 8 ? 1e-14 : 1e-6;
  const std::vector<double> scores_d = route_scores(s.T, s.n);
  const std::vector<T> scores(scores_d.begin(), scores_d.end());
  const Routed want = route_reference(s, scores_d);
  Guarded<int64_t> idx(size_t(s.T * s.K));
  Guarded<T> w(size_t(s.T * s.K)), probs(size_t(s.T * s.n)), dscores(size_t(s.T * s.n));
  cuda_emu::launch(2, 64, [&] { route_forward_kernel<T>(s, scores.data(), idx.p(), w.p(), probs.p()); });
  for (int64_t i = 0; i < s.T * s.K; ++i) {
    EXPECT_EQ(idx.p()[i], want.idx[size_t(i)]) << what << " token " << i / s.K << " pick " << i % s.K;
    EXPECT_TRUE(close(double(w.p()[i]), want.w[size_t(i)], rel)) << what << " weight " << i << ": " << w.p()[i];
  }
  for (int64_t i = 0; i < s.T * s.n; ++i)
    EXPECT_TRUE(close(double(probs.p()[i]), want.probs[size_t(i)], rel)) << what << " prob " << i;

  // backward, without the NaN token (its gradient is NaN on both sides)
  std::mt19937 rng(9);
  std::normal_distribution<double> dist(0.0, 1.0);
  std::vector<T> dw(size_t(s.T * s.K));
  for (T& x : dw) x = T(dist(rng));
  cuda_emu::launch(2, 64, [&] { route_backward_kernel<T>(s, idx.p(), w.p(), probs.p(), dw.data(), dscores.p()); });
  for (int64_t t = 0; t < s.T; ++t) {
    if (t == 3) continue;
    double dot = 0;
    for (int64_t k = 0; k < s.K; ++k)
      if (want.idx[size_t(t * s.K + k)] >= 0) dot += double(w.p()[t * s.K + k]) * double(dw[size_t(t * s.K + k)]);
    std::vector<double> ds(size_t(s.n), 0.0);
    for (int64_t i = 0; i < s.n; ++i) ds[size_t(i)] = s.full_softmax ? -double(probs.p()[t * s.n + i]) * dot : 0.0;
    for (int64_t k = 0; k < s.K; ++k) {
      const int64_t e = want.idx[size_t(t * s.K + k)];
      const double g = double(dw[size_t(t * s.K + k)]);
      if (e >= 0) ds[size_t(e)] += s.full_softmax ? double(probs.p()[t * s.n + e]) * g : double(w.p()[t * s.K + k]) * (g - dot);
    }
    for (int64_t i = 0; i < s.n; ++i)
      EXPECT_NEAR(double(dscores.p()[t * s.n + i]), ds[size_t(i)], 4 * rel * (1 + std::abs(ds[size_t(i)])))
          << what << " token " << t << " expert " << i;
  }
  EXPECT_TRUE(idx.guard_intact() && w.guard_intact() && probs.guard_intact() && dscores.guard_intact()) << what;
}

// More tokens than the 128 threads of the grid, so the kernels loop.
TEST(CudaMoeRoutingEmulated, TopKFloat) { check_routing<float>({150, 8, 2, -1.0, false}); }
TEST(CudaMoeRoutingEmulated, TopKDoubleFullSoftmax) { check_routing<double>({150, 16, 4, -1.0, true}); }
TEST(CudaMoeRoutingEmulated, TopPDouble) { check_routing<double>({150, 8, 4, 0.6, false}); }

TEST(CudaMoeRoutingEmulated, GroupL2NormForwardAndBackward) {
  const int64_t count = 300, r = 7;  // group 5 is all zeros: its gradient is 0
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<__nv_bfloat16> h(size_t(count * r));
  for (auto& x : h) x = __float2bfloat16_rn(dist(rng));
  for (int64_t j = 0; j < r; ++j) h[size_t(5 * r + j)] = __float2bfloat16_rn(0.0f);
  std::vector<float> dnorm(static_cast<size_t>(count));
  for (float& x : dnorm) x = dist(rng);
  Guarded<float> norm{size_t(count)};
  Guarded<__nv_bfloat16> dh{size_t(count * r)};
  cuda_emu::launch(2, 64, [&] { group_l2norm_forward_kernel<__nv_bfloat16, float>(count, r, h.data(), norm.p()); });
  cuda_emu::launch(3, 64, [&] {
    group_l2norm_backward_kernel<__nv_bfloat16, float>(count * r, r, h.data(), norm.p(), dnorm.data(), dh.p());
  });
  for (int64_t i = 0; i < count; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < r; ++j) ss += std::pow(double(__bfloat162float(h[size_t(i * r + j)])), 2);
    EXPECT_NEAR(norm.p()[i], std::sqrt(ss), 1e-6 * (1 + std::sqrt(ss))) << "group " << i;
    for (int64_t j = 0; j < r; ++j) {
      const double want = i == 5 ? 0.0 : __bfloat162float(h[size_t(i * r + j)]) * dnorm[size_t(i)] / std::sqrt(ss);
      EXPECT_NEAR(__bfloat162float(dh.p()[i * r + j]), want, 1e-2 * (1e-3 + std::abs(want))) << "group " << i;
    }
  }
  EXPECT_TRUE(norm.guard_intact() && dh.guard_intact());
}

// ---- the expert plan ----------------------------------------------------------------------------------------------
// Slot indices [T * K] in [-1, n): about one in seven empty (-1).
std::vector<int64_t> slot_indices(int64_t TK, int64_t n) {
  std::mt19937 rng(17);
  std::vector<int64_t> idx(static_cast<size_t>(TK));
  for (int64_t& e : idx) e = rng() % 7 == 0 ? -1 : int64_t(rng() % uint32_t(n));
  return idx;
}

TEST(CudaMoePlanEmulated, CountsAndStableCountingSort) {
  const int64_t TK = 2900, n = 5;  // three 1024-slot chunks in each expert's block
  const std::vector<int64_t> idx = slot_indices(TK, n);
  Guarded<unsigned long long> tally{size_t(n + 1)};
  std::fill(tally.p(), tally.p() + n, 0ull);
  tally.p()[n] = ~0ull;
  cuda_emu::launch(2, kPlanThreads, [&] { count_slots_kernel(idx.data(), TK, n, tally.p(), tally.p() + n); },
                   size_t(n) * sizeof(unsigned long long));
  std::vector<int64_t> offsets(size_t(n + 1), 0);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t want = std::count(idx.begin(), idx.end(), e);
    EXPECT_EQ(int64_t(tally.p()[e]), want) << "expert " << e;
    offsets[size_t(e + 1)] = offsets[size_t(e)] + want;
  }
  EXPECT_EQ(tally.p()[n], ~0ull) << "no bad slot";

  const int64_t P = offsets[size_t(n)];
  Guarded<int64_t> pair{size_t(P)}, row_of{size_t(TK)}, row_expert{size_t(P)};
  std::fill(row_of.p(), row_of.p() + TK, -1);
  cuda_emu::launch(unsigned(n), kPlanThreads,
                   [&] { plan_slots_kernel(idx.data(), TK, tally.p(), pair.p(), row_of.p(), row_expert.p()); });
  std::vector<int64_t> next(offsets.begin(), offsets.end() - 1);
  for (int64_t i = 0; i < TK; ++i) {  // slot order within each expert: stable
    const int64_t e = idx[size_t(i)];
    if (e < 0) {
      EXPECT_EQ(row_of.p()[i], -1) << "empty slot " << i;
      continue;
    }
    const int64_t row = next[size_t(e)]++;
    EXPECT_EQ(row_of.p()[i], row) << "slot " << i;
    EXPECT_EQ(pair.p()[row], i) << "row " << row;
    EXPECT_EQ(row_expert.p()[row], e) << "row " << row;
  }
  EXPECT_TRUE(tally.guard_intact() && pair.guard_intact() && row_of.guard_intact() && row_expert.guard_intact());
}

TEST(CudaMoePlanEmulated, CountsReportTheFirstBadSlot) {
  const int64_t TK = 3000, n = 4;
  std::vector<int64_t> idx = slot_indices(TK, n);
  idx[2500] = n, idx[1700] = -2, idx[2999] = 99;
  Guarded<unsigned long long> tally{size_t(n + 1)};
  std::fill(tally.p(), tally.p() + n, 0ull);
  tally.p()[n] = ~0ull;
  cuda_emu::launch(3, kPlanThreads, [&] { count_slots_kernel(idx.data(), TK, n, tally.p(), tally.p() + n); },
                   size_t(n) * sizeof(unsigned long long));
  EXPECT_EQ(tally.p()[n], 1700ull);
}

}  // namespace
}  // namespace uoe::cuda
