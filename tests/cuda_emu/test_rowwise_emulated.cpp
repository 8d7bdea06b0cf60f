// The CUDA row kernels (cuda/rowwise_kernels.cuh) and cross-entropy kernels (cuda/cross_entropy_kernels.cuh) run
// unchanged on the CPU through the stand-in runtime of tests/cuda_emu/include, against the formulas in double: each
// vector width and threads-per-row the launchers pick (a warp per row, blocks of 128 to 512 threads per row), grids
// smaller than the rows (grid-stride loops), rows shorter and longer than a pass of the group, -inf entries and an
// all -inf row, the norms' parameter gradients through their chunk partials and reduce_chunks_kernel, and cross
// entropy's target check, ignored rows and bf16 logits. Outputs start as NaN with a guard past their end. The
// CPU-vs-CUDA parity tests (tests/cuda/) judge the kernels on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/cross_entropy_kernels.cuh"
#include "cuda/rowwise_kernels.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

using cuda_emu::as, cuda_emu::bf16_normal, cuda_emu::Guarded, cuda_emu::rel_err, cuda_emu::to_double;

constexpr unsigned kGrid = 2;  // blocks: fewer than the rows, so every kernel loops

template <class T>
constexpr double tolerance() {
  return sizeof(T) == 8 ? 1e-12 : 1e-5;
}

// ---- softmax and log_softmax --------------------------------------------------------------------------------------
// Row 1 has -inf every third entry, row 2 is all -inf (its outputs NaN, as on the CPU).
std::vector<double> softmax_input(int64_t rows, int64_t n) {
  std::vector<double> x = bf16_normal(size_t(rows * n), uint32_t(n), 3.0);
  for (int64_t j = 0; j < n; ++j) {
    if (j % 3 == 0) x[size_t(n + j)] = -INFINITY;
    x[size_t(2 * n + j)] = -INFINITY;
  }
  return x;
}

void softmax_reference(int64_t rows, int64_t n, const std::vector<double>& x, bool log, std::vector<double>& y) {
  y.assign(x.size(), 0);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = x.data() + r * n;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < n; ++j) m = std::max(m, xr[j]);
    for (int64_t j = 0; j < n; ++j) s += std::exp(xr[j] - m);
    for (int64_t j = 0; j < n; ++j)
      y[size_t(r * n + j)] = std::isinf(m) ? NAN : log ? xr[j] - m - std::log(s) : std::exp(xr[j] - m) / s;
  }
}

template <class T, int V, int TPR>
void check_softmax(int64_t rows, int64_t n) {
  for (const bool log : {false, true}) {
    const std::string what = std::string(log ? "log_softmax" : "softmax") + " V=" + std::to_string(V) +
                             " TPR=" + std::to_string(TPR) + " n=" + std::to_string(n);
    const std::vector<double> x = softmax_input(rows, n), dy = bf16_normal(size_t(rows * n), 7);
    std::vector<double> y_ref;
    softmax_reference(rows, n, x, log, y_ref);
    const std::vector<T> xs = as<T>(x), dys = as<T>(dy);
    Guarded<T> y(x.size()), dx(x.size());
    cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
      if (log) softmax_fwd_kernel<T, V, TPR, true>(rows, n, xs.data(), y.p());
      else softmax_fwd_kernel<T, V, TPR, false>(rows, n, xs.data(), y.p());
    });
    EXPECT_LE(rel_err(y.p(), y_ref), tolerance<T>()) << what;

    // backward from the reference's y (rounded to T), rows 0 and 3.. (rows 1 and 2 have no finite gradient)
    const std::vector<T> ys = as<T>(y_ref);
    cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
      if (log) softmax_bwd_kernel<T, V, TPR, true>(rows, n, ys.data(), dys.data(), dx.p());
      else softmax_bwd_kernel<T, V, TPR, false>(rows, n, ys.data(), dys.data(), dx.p());
    });
    std::vector<double> dx_ref, dx_got;
    for (int64_t r = 0; r < rows; ++r) {
      if (r == 1 || r == 2) continue;
      double s = 0;
      for (int64_t j = 0; j < n; ++j) {
        const double yj = to_double(ys[size_t(r * n + j)]);
        s += log ? dy[size_t(r * n + j)] : dy[size_t(r * n + j)] * yj;
      }
      for (int64_t j = 0; j < n; ++j) {
        const double yj = to_double(ys[size_t(r * n + j)]), g = dy[size_t(r * n + j)];
        dx_ref.push_back(log ? g - std::exp(yj) * s : yj * (g - s));
        dx_got.push_back(to_double(dx.p()[r * n + j]));
      }
    }
    EXPECT_LE(rel_err(dx_got.data(), dx_ref), tolerance<T>()) << what << " backward";
    EXPECT_TRUE(y.guard_intact() && dx.guard_intact()) << what << ": a kernel wrote past its output";
  }
}

TEST(CudaRowwiseEmulated, SoftmaxWarpPerRowFourFloatsAtATime) { check_softmax<float, 4, 32>(11, 64); }
TEST(CudaRowwiseEmulated, SoftmaxBlockPerRowScalarFloats) { check_softmax<float, 1, 256>(5, 301); }
TEST(CudaRowwiseEmulated, SoftmaxBlockPerRowTwoDoublesAtATime) { check_softmax<double, 2, 128>(5, 520); }
TEST(CudaRowwiseEmulated, SoftmaxWideRowsOf512Threads) { check_softmax<float, 4, 512>(4, 4100); }

// ---- RMSNorm and LayerNorm ----------------------------------------------------------------------------------------
struct NormData {
  int64_t rows, n, chunk, groups;
  std::vector<double> x, w, b, dy;
  NormData(int64_t rows, int64_t n, int64_t chunk)
      : rows(rows), n(n), chunk(chunk), groups((rows + chunk - 1) / chunk), x(bf16_normal(size_t(rows * n), 11, 2.0)),
        w(bf16_normal(size_t(n), 12)), b(bf16_normal(size_t(n), 13)), dy(bf16_normal(size_t(rows * n), 14)) {}
};

// Sums partials [groups, n] number `which` (0: the first [groups, n] of part, 1: the next) with reduce_chunks_kernel.
template <class T>
std::vector<T> reduce_partials(const Guarded<T>& part, int64_t groups, int64_t n, int which) {
  Guarded<T> out{size_t(n)};
  cuda_emu::launch(unsigned((n + 31) / 32), dim3(32, 8),
                   [&] { reduce_chunks_kernel<T>(groups, n, part.p() + which * groups * n, out.p()); });
  EXPECT_TRUE(out.guard_intact()) << "reduce_chunks_kernel wrote past its output";
  return {out.p(), out.p() + n};
}

template <class T, int V, int TPR>
void check_rms_norm(const NormData& d) {
  const std::string what = "rms_norm V=" + std::to_string(V) + " TPR=" + std::to_string(TPR) + " n=" + std::to_string(d.n);
  const T eps = T(1e-5);
  std::vector<double> y_ref(d.x.size()), rstd_ref(size_t(d.rows)), dx_ref(d.x.size()), dw_ref(size_t(d.n), 0.0);
  for (int64_t r = 0; r < d.rows; ++r) {
    const double* xr = d.x.data() + r * d.n;
    double ss = 0, c = 0;
    for (int64_t j = 0; j < d.n; ++j) ss += xr[j] * xr[j];
    const double rs = 1 / std::sqrt(ss / double(d.n) + double(eps));
    rstd_ref[size_t(r)] = rs;
    for (int64_t j = 0; j < d.n; ++j) c += d.dy[size_t(r * d.n + j)] * d.w[size_t(j)] * xr[j];
    for (int64_t j = 0; j < d.n; ++j) {
      const double g = d.dy[size_t(r * d.n + j)];
      y_ref[size_t(r * d.n + j)] = xr[j] * rs * d.w[size_t(j)];
      dx_ref[size_t(r * d.n + j)] = rs * g * d.w[size_t(j)] - xr[j] * c * rs * rs * rs / double(d.n);
      dw_ref[size_t(j)] += g * xr[j] * rs;
    }
  }
  const std::vector<T> x = as<T>(d.x), w = as<T>(d.w), dy = as<T>(d.dy), rstd_in = as<T>(rstd_ref);
  Guarded<T> y(d.x.size()), rstd(size_t(d.rows)), dx(d.x.size()), part(size_t(d.groups * d.n));
  cuda_emu::launch(kGrid, Group<TPR>::kBlock,
                   [&] { rms_fwd_kernel<T, V, TPR>(d.rows, d.n, x.data(), w.data(), eps, y.p(), rstd.p()); });
  EXPECT_LE(rel_err(y.p(), y_ref), tolerance<T>()) << what;
  EXPECT_LE(rel_err(rstd.p(), rstd_ref), tolerance<T>()) << what;
  cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
    rms_bwd_kernel<T, V, TPR>(d.rows, d.n, d.chunk, x.data(), w.data(), rstd_in.data(), dy.data(), dx.p(), part.p());
  });
  EXPECT_LE(rel_err(dx.p(), dx_ref), tolerance<T>()) << what;
  EXPECT_LE(rel_err(reduce_partials(part, d.groups, d.n, 0).data(), dw_ref), tolerance<T>()) << what;
  EXPECT_TRUE(y.guard_intact() && rstd.guard_intact() && dx.guard_intact() && part.guard_intact()) << what;
}

template <class T, int V, int TPR>
void check_layer_norm(const NormData& d) {
  const std::string what = "layer_norm V=" + std::to_string(V) + " TPR=" + std::to_string(TPR) + " n=" + std::to_string(d.n);
  const T eps = T(1e-5);
  std::vector<double> y_ref(d.x.size()), mean_ref(size_t(d.rows)), rstd_ref(size_t(d.rows)), dx_ref(d.x.size()),
      dw_ref(size_t(d.n), 0.0), db_ref(size_t(d.n), 0.0);
  for (int64_t r = 0; r < d.rows; ++r) {
    const double* xr = d.x.data() + r * d.n;
    double mu = 0, var = 0, sg = 0, sgx = 0;
    for (int64_t j = 0; j < d.n; ++j) mu += xr[j] / double(d.n);
    for (int64_t j = 0; j < d.n; ++j) var += (xr[j] - mu) * (xr[j] - mu) / double(d.n);
    const double rs = 1 / std::sqrt(var + double(eps));
    mean_ref[size_t(r)] = mu, rstd_ref[size_t(r)] = rs;
    for (int64_t j = 0; j < d.n; ++j) {
      const double g = d.dy[size_t(r * d.n + j)] * d.w[size_t(j)];
      sg += g, sgx += g * (xr[j] - mu) * rs;
    }
    for (int64_t j = 0; j < d.n; ++j) {
      const double xhat = (xr[j] - mu) * rs, dyj = d.dy[size_t(r * d.n + j)];
      y_ref[size_t(r * d.n + j)] = xhat * d.w[size_t(j)] + d.b[size_t(j)];
      dx_ref[size_t(r * d.n + j)] = rs * (dyj * d.w[size_t(j)] - sg / double(d.n) - xhat * sgx / double(d.n));
      dw_ref[size_t(j)] += dyj * xhat, db_ref[size_t(j)] += dyj;
    }
  }
  const std::vector<T> x = as<T>(d.x), w = as<T>(d.w), b = as<T>(d.b), dy = as<T>(d.dy);
  const std::vector<T> mean_in = as<T>(mean_ref), rstd_in = as<T>(rstd_ref);
  Guarded<T> y(d.x.size()), mean(size_t(d.rows)), rstd(size_t(d.rows)), dx(d.x.size()), part(size_t(2 * d.groups * d.n));
  cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
    ln_fwd_kernel<T, V, TPR>(d.rows, d.n, x.data(), w.data(), b.data(), eps, y.p(), mean.p(), rstd.p());
  });
  EXPECT_LE(rel_err(y.p(), y_ref), tolerance<T>()) << what;
  EXPECT_LE(rel_err(mean.p(), mean_ref), tolerance<T>()) << what;
  EXPECT_LE(rel_err(rstd.p(), rstd_ref), tolerance<T>()) << what;
  cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
    ln_bwd_kernel<T, V, TPR>(d.rows, d.n, d.chunk, x.data(), w.data(), mean_in.data(), rstd_in.data(), dy.data(),
                             dx.p(), part.p());
  });
  EXPECT_LE(rel_err(dx.p(), dx_ref), tolerance<T>()) << what;
  EXPECT_LE(rel_err(reduce_partials(part, d.groups, d.n, 0).data(), dw_ref), tolerance<T>()) << what;
  EXPECT_LE(rel_err(reduce_partials(part, d.groups, d.n, 1).data(), db_ref), tolerance<T>()) << what;
  EXPECT_TRUE(y.guard_intact() && mean.guard_intact() && rstd.guard_intact() && dx.guard_intact() &&
              part.guard_intact())
      << what;
}

// 13 rows in chunks of 3 (a short last chunk), over 2 blocks.
TEST(CudaRowwiseEmulated, NormsWarpPerRowFourFloatsAtATime) {
  const NormData d(13, 96, 3);
  check_rms_norm<float, 4, 32>(d);
  check_layer_norm<float, 4, 32>(d);
}
TEST(CudaRowwiseEmulated, NormsBlockPerRowScalarDoubles) {
  const NormData d(7, 333, 2);
  check_rms_norm<double, 1, 256>(d);
  check_layer_norm<double, 1, 256>(d);
}

// ---- cross entropy ------------------------------------------------------------------------------------------------
constexpr int64_t kIgnore = -100;

// Logits S [rows, vocab]; every third row ignored; `bad_row` (if >= 0) gets the out-of-range target vocab.
template <class S, int V, int TPR>
void check_cross_entropy(int64_t rows, int64_t vocab, int64_t bad_row) {
  using T = compute_t<S>;
  const std::string what = "cross_entropy V=" + std::to_string(V) + " TPR=" + std::to_string(TPR) +
                           " vocab=" + std::to_string(vocab) + " bad_row=" + std::to_string(bad_row);
  const double tol = sizeof(S) == 2 ? 1e-6 : tolerance<T>();  // bf16 logits are exact in float
  const std::vector<double> logit = bf16_normal(size_t(rows * vocab), 21, 4.0), g = bf16_normal(size_t(rows), 22);
  std::vector<int64_t> target(static_cast<size_t>(rows));
  std::mt19937 rng(23);
  int64_t count = 0;
  for (int64_t r = 0; r < rows; ++r) {
    target[size_t(r)] = r % 3 == 2 ? kIgnore : int64_t(rng() % uint32_t(vocab));
    count += r % 3 != 2;
  }
  if (bad_row >= 0) target[size_t(bad_row)] = vocab;
  const std::vector<S> x = as<S>(logit);

  Guarded<int64_t> check(3);
  cuda_emu::launch(1, kCheckThreads, [&] { ce_check_kernel(rows, vocab, target.data(), kIgnore, check.p()); });
  EXPECT_EQ(check.p()[0], count + (bad_row >= 0 && bad_row % 3 == 2)) << what;
  EXPECT_EQ(check.p()[1], bad_row) << what;
  EXPECT_EQ(check.p()[2], bad_row >= 0 ? vocab : 0) << what;

  std::vector<double> lse_ref(static_cast<size_t>(rows)), loss_ref(static_cast<size_t>(rows)), dx_ref(logit.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = logit.data() + r * vocab;
    double m = -INFINITY, s = 0;
    for (int64_t j = 0; j < vocab; ++j) m = std::max(m, xr[j]);
    for (int64_t j = 0; j < vocab; ++j) s += std::exp(xr[j] - m);
    const int64_t t = target[size_t(r)];
    lse_ref[size_t(r)] = m + std::log(s);
    loss_ref[size_t(r)] = t == kIgnore ? 0 : lse_ref[size_t(r)] - xr[t];
    for (int64_t j = 0; j < vocab; ++j)
      dx_ref[size_t(r * vocab + j)] = t == kIgnore ? 0 : (std::exp(xr[j] - lse_ref[size_t(r)]) - (j == t)) * g[size_t(r)];
  }
  Guarded<T> loss{size_t(rows)}, lse{size_t(rows)};
  Guarded<S> dx(logit.size());
  cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
    ce_fwd_kernel<S, V, TPR>(rows, vocab, x.data(), target.data(), kIgnore, check.p(), loss.p(), lse.p());
  });
  const std::vector<T> lse_in = as<T>(lse_ref), scale = as<T>(g);
  cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
    ce_bwd_kernel<S, V, TPR>(rows, vocab, x.data(), target.data(), kIgnore, check.p(), lse_in.data(), scale.data(),
                             dx.p());
  });
  EXPECT_TRUE(loss.guard_intact() && lse.guard_intact() && dx.guard_intact()) << what;
  if (bad_row >= 0) {  // a bad target: the kernels write nothing
    for (int64_t r = 0; r < rows; ++r) EXPECT_TRUE(std::isnan(double(loss.p()[r]))) << what << " row " << r;
    EXPECT_TRUE(std::isnan(to_double(dx.p()[0]))) << what;
    return;
  }
  EXPECT_LE(rel_err(lse.p(), lse_ref), tol) << what;
  EXPECT_LE(rel_err(loss.p(), loss_ref), 10 * tol) << what;  // lse - x: cancellation
  EXPECT_LE(rel_err(dx.p(), dx_ref), sizeof(S) == 2 ? 1e-2 : tol) << what;

  const std::vector<T> per_row = as<T>(loss_ref);
  Guarded<T> mean{1}, row_scale{size_t(rows)};
  cuda_emu::launch(1, 256, [&] { ce_mean_kernel<T>(rows, per_row.data(), count, mean.p()); });
  double sum = 0;
  for (const T l : per_row) sum += double(l);
  EXPECT_NEAR(double(mean.p()[0]), sum / double(count), tolerance<T>() * std::abs(sum / double(count))) << what;
  const T g0 = T(1.5);
  cuda_emu::launch(kGrid, 32, [&] { ce_scale_kernel<T>(rows, &g0, count, row_scale.p()); });
  for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(row_scale.p()[r], T(1.5 / double(count))) << what << " row " << r;
  EXPECT_TRUE(mean.guard_intact() && row_scale.guard_intact()) << what;
}

TEST(CudaRowwiseEmulated, CrossEntropyFloatWarpPerRow) { check_cross_entropy<float, 4, 32>(9, 200, -1); }
TEST(CudaRowwiseEmulated, CrossEntropyBf16BlockPerRow) { check_cross_entropy<__nv_bfloat16, 8, 128>(7, 1064, -1); }
TEST(CudaRowwiseEmulated, CrossEntropyDoubleScalar) { check_cross_entropy<double, 1, 256>(5, 333, -1); }
TEST(CudaRowwiseEmulated, CrossEntropyBadTargetWritesNothing) { check_cross_entropy<float, 4, 32>(9, 200, 4); }

}  // namespace
}  // namespace uoe::cuda
