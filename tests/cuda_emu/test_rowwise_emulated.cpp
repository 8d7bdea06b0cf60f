// The CUDA row kernels (cuda/rowwise_kernels.cuh) and cross-entropy kernels (cuda/cross_entropy_kernels.cuh) run
// unchanged on the CPU through the stand-in runtime of tests/cuda_emu/include, against the CPU row tests' float64
// references (tests/ops/cpu/rowwise_reference.h): each vector width and threads-per-row the launchers pick (a warp per
// row, blocks of 128 to 512 threads per row), grids smaller than the rows (grid-stride loops), rows shorter and longer
// than a pass of the group, -inf entries and an all -inf row, the norms' parameter gradients through their chunk
// partials and reduce_chunks_kernel, and cross entropy's target check, ignored rows and bf16 logits. Outputs start as
// NaN with a guard past their end. The CPU-vs-CUDA parity tests (tests/cuda/) judge the kernels on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "cuda/cross_entropy_kernels.cuh"
#include "cuda/rowwise_kernels.cuh"
#include "tests/cuda_emu/emu_check.h"
#include "tests/ops/cpu/rowwise_reference.h"

namespace uoe::cuda {
namespace {

using cuda_emu::as, cuda_emu::bf16_normal, cuda_emu::Guarded, cuda_emu::rel_err, cuda_emu::to_double;
using rowwise_reference::kEps, rowwise_reference::kIgnore, rowwise_reference::ref_ce, rowwise_reference::ref_norm,
    rowwise_reference::ref_norm_bwd, rowwise_reference::ref_softmax, rowwise_reference::ref_softmax_bwd;
using Doubles = std::vector<double>;

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

template <class T, int V, int TPR>
void check_softmax(int64_t rows, int64_t n) {
  for (const bool log : {false, true}) {
    const std::string what = std::string(log ? "log_softmax" : "softmax") + " V=" + std::to_string(V) +
                             " TPR=" + std::to_string(TPR) + " n=" + std::to_string(n);
    const std::vector<double> x = softmax_input(rows, n), dy = bf16_normal(size_t(rows * n), 7);
    Doubles y_ref, dx_ref;
    ref_softmax(rows, n, x, y_ref, log);
    const std::vector<T> xs = as<T>(x), dys = as<T>(dy);
    Guarded<T> y(x.size()), dx(x.size());
    cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
      if (log) softmax_fwd_kernel<T, V, TPR, true>(rows, n, xs.data(), y.p());
      else softmax_fwd_kernel<T, V, TPR, false>(rows, n, xs.data(), y.p());
    });
    EXPECT_LE(rel_err(y.p(), y_ref), tolerance<T>()) << what;

    // backward from the reference's y rounded to T (row 2's y, all NaN, gives NaN on both sides)
    const std::vector<T> ys = as<T>(y_ref);
    cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
      if (log) softmax_bwd_kernel<T, V, TPR, true>(rows, n, ys.data(), dys.data(), dx.p());
      else softmax_bwd_kernel<T, V, TPR, false>(rows, n, ys.data(), dys.data(), dx.p());
    });
    Doubles y_rounded(ys.size());
    for (size_t i = 0; i < ys.size(); ++i) y_rounded[i] = to_double(ys[i]);
    ref_softmax_bwd(rows, n, y_rounded, dy, dx_ref, log);
    EXPECT_LE(rel_err(dx.p(), dx_ref), tolerance<T>()) << what << " backward";
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

// x's mean and rstd as the kernels' inputs (rounded to T), and as the reference's (the same values).
template <class T>
std::vector<T> rounded_to(const Doubles& v, Doubles& as_double) {
  const std::vector<T> r = as<T>(v);
  as_double.resize(r.size());
  for (size_t i = 0; i < r.size(); ++i) as_double[i] = to_double(r[i]);
  return r;
}

template <class T, int V, int TPR>
void check_rms_norm(const NormData& d) {
  const std::string what = "rms_norm V=" + std::to_string(V) + " TPR=" + std::to_string(TPR) + " n=" + std::to_string(d.n);
  Doubles y_ref, mean_ref, rstd_ref, dx_ref, dw_ref, db_ref, rstd_used;
  ref_norm(false, d.rows, d.n, d.x, &d.w, nullptr, y_ref, mean_ref, rstd_ref);
  const std::vector<T> x = as<T>(d.x), w = as<T>(d.w), dy = as<T>(d.dy), rstd_in = rounded_to<T>(rstd_ref, rstd_used);
  ref_norm_bwd(false, d.rows, d.n, d.x, &d.w, mean_ref, rstd_used, d.dy, dx_ref, dw_ref, db_ref);
  Guarded<T> y(d.x.size()), rstd(size_t(d.rows)), dx(d.x.size()), part(size_t(d.groups * d.n));
  cuda_emu::launch(kGrid, Group<TPR>::kBlock,
                   [&] { rms_fwd_kernel<T, V, TPR>(d.rows, d.n, x.data(), w.data(), T(kEps), y.p(), rstd.p()); });
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
  Doubles y_ref, mean_ref, rstd_ref, dx_ref, dw_ref, db_ref, mean_used, rstd_used;
  ref_norm(true, d.rows, d.n, d.x, &d.w, &d.b, y_ref, mean_ref, rstd_ref);
  const std::vector<T> x = as<T>(d.x), w = as<T>(d.w), b = as<T>(d.b), dy = as<T>(d.dy);
  const std::vector<T> mean_in = rounded_to<T>(mean_ref, mean_used), rstd_in = rounded_to<T>(rstd_ref, rstd_used);
  ref_norm_bwd(true, d.rows, d.n, d.x, &d.w, mean_used, rstd_used, d.dy, dx_ref, dw_ref, db_ref);
  Guarded<T> y(d.x.size()), mean(size_t(d.rows)), rstd(size_t(d.rows)), dx(d.x.size()), part(size_t(2 * d.groups * d.n));
  cuda_emu::launch(kGrid, Group<TPR>::kBlock, [&] {
    ln_fwd_kernel<T, V, TPR>(d.rows, d.n, x.data(), w.data(), b.data(), T(kEps), y.p(), mean.p(), rstd.p());
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

  Doubles loss_ref, lse_ref, p, dx_ref(logit.size());
  if (bad_row < 0) {  // (a bad target has no reference)
    ref_ce(rows, vocab, logit, target, loss_ref, lse_ref);
    ref_softmax(rows, vocab, logit, p, false);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < vocab; ++j) {
        const int64_t t = target[size_t(r)];
        dx_ref[size_t(r * vocab + j)] = t == kIgnore ? 0.0 : (p[size_t(r * vocab + j)] - (j == t)) * g[size_t(r)];
      }
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
