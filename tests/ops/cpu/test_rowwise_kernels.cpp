// Tests of uoe::cpu row-wise kernels: double references, finite differences, targets, thread independence.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops/kernels/rowwise.h"
#include "ops/cpu/rowwise_reference.h"

namespace {

using namespace uoe::rowwise_reference;
namespace k = uoe::cpu;

const int64_t kRows[] = {1, 3, 67};
const int64_t kCols[] = {1, 7, 129, 1000};

// Random values with |v| in [lo, hi] and a random sign: never zero.
Vec rand_vec(size_t n, uint32_t seed, double lo = 0.1, double hi = 3.0) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> mag(lo, hi);
  std::bernoulli_distribution sign(0.5);
  Vec v(n);
  for (auto& e : v) e = sign(rng) ? mag(rng) : -mag(rng);
  return v;
}
template <class T>
std::vector<T> as(const Vec& v) {
  return std::vector<T>(v.begin(), v.end());
}
// Values exactly representable in T (so a double reference sees the same inputs as the T kernel).
template <class T>
Vec rounded(const Vec& v) {
  Vec r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = static_cast<double>(static_cast<T>(v[i]));
  return r;
}
std::vector<int64_t> rand_targets(int64_t rows, int64_t vocab, uint32_t seed, bool with_ignored) {
  std::mt19937 rng(seed);
  std::vector<int64_t> t(rows);
  for (int64_t r = 0; r < rows; ++r) t[r] = (with_ignored && r % 3 == 1) ? kIgnore : int64_t(rng() % vocab);
  return t;
}

// |got - ref| <= tol (|ref| + scale) element-wise, scale = max(max|ref|, min_scale): results that cancel to
// much less than the magnitude of their terms (min_scale) are judged against that magnitude.
template <class T>
void expect_close(const std::vector<T>& got, const Vec& ref, double tol, const std::string& what,
                  double min_scale = 0) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double scale = min_scale;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double err = std::fabs(double(got[i]) - ref[i]);
    if (!(err <= tol * (std::fabs(ref[i]) + scale)) && ++bad <= 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << double(got[i]) << " expected " << ref[i];
  }
  EXPECT_EQ(bad, 0) << what;
}
template <class T>
double tol_for() {
  return std::is_same_v<T, float> ? 2e-6 : 1e-13;
}
std::string tag(const char* name, int64_t rows, int64_t n) {
  return std::string(name) + " rows=" + std::to_string(rows) + " n=" + std::to_string(n);
}

// ---- forward + backward against the references, float and double ----------------------------------------
template <class T>
void run_softmax_case(bool log, int64_t rows, int64_t n) {
  const Vec x = rounded<T>(rand_vec(rows * n, 1 + rows * 7 + n, 0.1, 8.0));
  const Vec dy = rounded<T>(rand_vec(rows * n, 2 + rows + n));
  std::vector<T> xt = as<T>(x), yt(rows * n), dxt(rows * n);
  (log ? k::log_softmax_forward<T> : k::softmax_forward<T>)(rows, n, xt.data(), yt.data());
  Vec yref, dxref;
  ref_softmax(rows, n, x, yref, log);
  expect_close(yt, yref, tol_for<T>(), tag(log ? "log_softmax fwd" : "softmax fwd", rows, n));
  // Backward from the kernel's own y (as a caller would), reference in double from the same y.
  const std::vector<T> dyt = as<T>(dy);
  (log ? k::log_softmax_backward<T> : k::softmax_backward<T>)(rows, n, yt.data(), dyt.data(), dxt.data());
  ref_softmax_bwd(rows, n, Vec(yt.begin(), yt.end()), dy, dxref, log);
  expect_close(dxt, dxref, tol_for<T>(), tag(log ? "log_softmax bwd" : "softmax bwd", rows, n));
}

template <class T>
void run_norm_case(bool layer, int64_t rows, int64_t n, bool with_w, bool with_b) {
  const std::string name = std::string(layer ? "layer_norm" : "rms_norm") + (with_w ? " w" : "") + (with_b ? " b" : "");
  const Vec x = rounded<T>(rand_vec(rows * n, 3 + rows * 5 + n)), dy = rounded<T>(rand_vec(rows * n, 4 + n));
  const Vec w = rounded<T>(rand_vec(n, 5 + n, 0.5, 1.5)), b = rounded<T>(rand_vec(n, 6 + n));
  const std::vector<T> xt = as<T>(x), wt = as<T>(w), bt = as<T>(b), dyt = as<T>(dy);
  std::vector<T> yt(rows * n), mt(rows), rt(rows), dxt(rows * n), dwt(n), dbt(n);
  const T* wp = with_w ? wt.data() : nullptr;
  if (layer)
    k::layer_norm_forward<T>(rows, n, xt.data(), wp, with_b ? bt.data() : nullptr, kEps, yt.data(), mt.data(),
                             rt.data());
  else
    k::rms_norm_forward<T>(rows, n, xt.data(), wp, kEps, yt.data(), rt.data());
  Vec yref, mref, rref, dxref, dwref, dbref;
  ref_norm(layer, rows, n, x, with_w ? &w : nullptr, layer && with_b ? &b : nullptr, yref, mref, rref);
  expect_close(yt, yref, tol_for<T>() * 4, tag((name + " fwd y").c_str(), rows, n));
  expect_close(rt, rref, tol_for<T>() * 4, tag((name + " fwd rstd").c_str(), rows, n));
  if (layer) expect_close(mt, mref, tol_for<T>() * 4, tag((name + " fwd mean").c_str(), rows, n));
  if (layer)
    k::layer_norm_backward<T>(rows, n, xt.data(), wp, mt.data(), rt.data(), dyt.data(), dxt.data(), dwt.data(),
                              with_b ? dbt.data() : nullptr);
  else
    k::rms_norm_backward<T>(rows, n, xt.data(), wp, rt.data(), dyt.data(), dxt.data(), dwt.data());
  ref_norm_bwd(layer, rows, n, x, with_w ? &w : nullptr, mref, rref, dy, dxref, dwref, dbref);
  // dx = rstd * (terms of size |dy w| <= 4.5) that may cancel (e.g. n = 1, where rstd ~ 1/sqrt(eps)).
  const double dx_terms = *std::max_element(rref.begin(), rref.end()) * 4.5;
  expect_close(dxt, dxref, tol_for<T>() * 8, tag((name + " bwd dx").c_str(), rows, n), dx_terms);
  expect_close(dwt, dwref, tol_for<T>() * 8, tag((name + " bwd dweight").c_str(), rows, n));
  if (layer && with_b) expect_close(dbt, dbref, tol_for<T>() * 8, tag((name + " bwd dbias").c_str(), rows, n));
}

template <class T>
void run_ce_case(int64_t rows, int64_t v) {
  const Vec x = rounded<T>(rand_vec(rows * v, 7 + rows * 3 + v, 0.1, 6.0));
  const Vec g = rounded<T>(rand_vec(rows, 8 + rows));
  const auto t = rand_targets(rows, v, 9 + rows + v, /*with_ignored=*/true);
  const std::vector<T> xt = as<T>(x), gt = as<T>(g);
  std::vector<T> loss(rows), lse(rows), dl(rows * v);
  k::cross_entropy_forward<T>(rows, v, xt.data(), t.data(), kIgnore, loss.data(), lse.data());
  Vec lref, lseref;
  ref_ce(rows, v, x, t, lref, lseref);
  expect_close(loss, lref, tol_for<T>(), tag("cross_entropy loss", rows, v));
  expect_close(lse, lseref, tol_for<T>(), tag("cross_entropy lse", rows, v));
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == kIgnore) {
      EXPECT_EQ(loss[r], T(0));
    }
  }
  k::cross_entropy_backward<T>(rows, v, xt.data(), t.data(), kIgnore, lse.data(), gt.data(), dl.data());
  Vec p, dref(rows * v);
  ref_softmax(rows, v, x, p, false);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < v; ++j)
      dref[r * v + j] = t[r] == kIgnore ? 0.0 : (p[r * v + j] - (j == t[r] ? 1.0 : 0.0)) * g[r];
  expect_close(dl, dref, tol_for<T>(), tag("cross_entropy bwd", rows, v));
  for (int64_t r = 0; r < rows; ++r) {
    if (t[r] == kIgnore) {
      for (int64_t j = 0; j < v; ++j) EXPECT_EQ(dl[r * v + j], T(0));
    }
  }
}

TEST(RowwiseKernels, SoftmaxMatchesReference) {
  for (int64_t rows : kRows)
    for (int64_t n : kCols)
      for (bool log : {false, true}) {
        run_softmax_case<float>(log, rows, n);
        run_softmax_case<double>(log, rows, n);
      }
}
TEST(RowwiseKernels, NormsMatchReference) {
  for (int64_t rows : kRows)
    for (int64_t n : kCols)
      for (bool layer : {false, true})
        for (int variant = 0; variant < 3; ++variant) {  // weight+bias, weight only, neither
          run_norm_case<float>(layer, rows, n, variant < 2, variant == 0);
          run_norm_case<double>(layer, rows, n, variant < 2, variant == 0);
        }
}
TEST(RowwiseKernels, CrossEntropyMatchesReference) {
  for (int64_t rows : kRows)
    for (int64_t v : kCols) {
      run_ce_case<float>(rows, v);
      run_ce_case<double>(rows, v);
    }
}

// ---- finite differences (double): loss = sum(out * W) ------------------------------------------------------
// Compares analytic[i] with the central difference of loss() in p[i], for all i or a random sample.
void fd_check(Vec& p, const Vec& analytic, const std::function<double()>& loss, const std::string& what,
              size_t max_points = 60) {
  std::mt19937 rng(11);
  std::vector<size_t> idx(p.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  if (idx.size() > max_points) {
    std::shuffle(idx.begin(), idx.end(), rng);
    idx.resize(max_points);
  }
  const double h = 1e-5;
  for (size_t i : idx) {
    const double save = p[i];
    p[i] = save + h;
    const double lp = loss();
    p[i] = save - h;
    const double lm = loss();
    p[i] = save;
    const double num = (lp - lm) / (2 * h);
    EXPECT_NEAR(analytic[i], num, 1e-6 * (1 + std::fabs(num))) << what << " element " << i;
  }
}
double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}
const std::pair<int64_t, int64_t> kFdShapes[] = {{1, 1}, {3, 7}, {5, 33}, {67, 129}};

TEST(RowwiseKernels, SoftmaxFiniteDifferences) {
  for (const auto& [rows_, n_] : kFdShapes)
    for (bool log : {false, true}) {
      const int64_t rows = rows_, n = n_;  // plain variables: the lambda below captures them
      Vec x = rand_vec(rows * n, 21 + n, 0.1, 4.0), W = rand_vec(rows * n, 22 + n), y(rows * n), dx(rows * n);
      auto fwd = log ? k::log_softmax_forward<double> : k::softmax_forward<double>;
      auto loss = [&] {
        fwd(rows, n, x.data(), y.data());
        return dot(y, W);
      };
      loss();
      (log ? k::log_softmax_backward<double> : k::softmax_backward<double>)(rows, n, y.data(), W.data(), dx.data());
      fd_check(x, dx, loss, tag(log ? "log_softmax dx" : "softmax dx", rows, n));
    }
}

TEST(RowwiseKernels, NormFiniteDifferences) {
  for (const auto& [rows_, n_] : kFdShapes)
    for (bool layer : {false, true}) {
      const int64_t rows = rows_, n = n_;  // plain variables: the lambda below captures them
      Vec x = rand_vec(rows * n, 31 + n), w = rand_vec(n, 32 + n, 0.5, 1.5), b = rand_vec(n, 33 + n);
      const Vec W = rand_vec(rows * n, 34 + n);
      Vec y(rows * n), mean(rows), rstd(rows), dx(rows * n), dw(n), db(n);
      auto loss = [&] {
        if (layer)
          k::layer_norm_forward<double>(rows, n, x.data(), w.data(), b.data(), kEps, y.data(), mean.data(),
                                        rstd.data());
        else
          k::rms_norm_forward<double>(rows, n, x.data(), w.data(), kEps, y.data(), rstd.data());
        return dot(y, W);
      };
      loss();
      if (layer)
        k::layer_norm_backward<double>(rows, n, x.data(), w.data(), mean.data(), rstd.data(), W.data(), dx.data(),
                                       dw.data(), db.data());
      else
        k::rms_norm_backward<double>(rows, n, x.data(), w.data(), rstd.data(), W.data(), dx.data(), dw.data());
      const char* name = layer ? "layer_norm" : "rms_norm";
      fd_check(x, dx, loss, tag((std::string(name) + " dx").c_str(), rows, n));
      fd_check(w, dw, loss, tag((std::string(name) + " dweight").c_str(), rows, n));
      if (layer) fd_check(b, db, loss, tag("layer_norm dbias", rows, n));
    }
}

TEST(RowwiseKernels, CrossEntropyFiniteDifferences) {
  for (const auto& [rows_, v_] : kFdShapes) {
    const int64_t rows = rows_, v = v_;  // plain variables: lambdas below capture them
    Vec x = rand_vec(rows * v, 41 + v, 0.1, 4.0);
    const Vec g = rand_vec(rows, 42 + rows);
    const auto t = rand_targets(rows, v, 43 + v, /*with_ignored=*/rows > 1);
    Vec loss_r(rows), lse(rows), dl(rows * v);
    auto loss = [&] {
      k::cross_entropy_forward<double>(rows, v, x.data(), t.data(), kIgnore, loss_r.data(), lse.data());
      return dot(loss_r, g);
    };
    loss();
    k::cross_entropy_backward<double>(rows, v, x.data(), t.data(), kIgnore, lse.data(), g.data(), dl.data());
    fd_check(x, dl, loss, tag("cross_entropy dlogits", rows, v));
  }
}

// ---- cross entropy targets --------------------------------------------------------------------------------
TEST(RowwiseKernels, CrossEntropyBadTargetThrows) {
  const int64_t rows = 4, v = 1000;
  const std::vector<float> x = as<float>(rand_vec(rows * v, 51));
  std::vector<float> loss(rows, -7.0f), lse(rows, -7.0f), dl(rows * v, -7.0f), g(rows, 1.0f);
  for (int64_t bad : {int64_t{5000}, int64_t{1000}, int64_t{-1}}) {
    std::vector<int64_t> t = {3, kIgnore, bad, 0};
    try {
      k::cross_entropy_forward<float>(rows, v, x.data(), t.data(), kIgnore, loss.data(), lse.data());
      ADD_FAILURE() << "no exception for target " << bad;
    } catch (const std::out_of_range& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find("row 2"), std::string::npos) << msg;
      EXPECT_NE(msg.find("target " + std::to_string(bad)), std::string::npos) << msg;
      EXPECT_NE(msg.find("vocab size 1000"), std::string::npos) << msg;
    }
    EXPECT_THROW(k::cross_entropy_backward<float>(rows, v, x.data(), t.data(), kIgnore, lse.data(), g.data(),
                                                   dl.data()),
                 std::out_of_range);
    for (float l : loss) EXPECT_EQ(l, -7.0f);  // nothing written
    for (float d : dl) EXPECT_EQ(d, -7.0f);
  }
  // A target equal to ignore_index is fine even when it is outside [0, vocab); so is a non-negative ignore_index.
  std::vector<int64_t> t = {3, 999, 0, 7};
  EXPECT_NO_THROW(k::cross_entropy_forward<float>(rows, v, x.data(), t.data(), 7, loss.data(), lse.data()));
  EXPECT_EQ(loss[3], 0.0f);
}

// ---- -inf entries, in-place use -----------------------------------------------------------------------------
TEST(RowwiseKernels, NegativeInfinityEntries) {
  const float ninf = -std::numeric_limits<float>::infinity();
  const int64_t n = 5;
  std::vector<float> x = {1.0f, ninf, 2.0f, ninf, 0.5f,   // some -inf: probability 0
                          ninf, ninf, ninf, ninf, ninf};  // all -inf: NaN (as PyTorch)
  std::vector<float> y(10), ly(10);
  k::softmax_forward<float>(2, n, x.data(), y.data());
  k::log_softmax_forward<float>(2, n, x.data(), ly.data());
  EXPECT_EQ(y[1], 0.0f);
  EXPECT_EQ(y[3], 0.0f);
  EXPECT_NEAR(y[0] + y[2] + y[4], 1.0f, 1e-6f);
  EXPECT_EQ(ly[1], ninf);
  EXPECT_NEAR(ly[2], 2.0 - std::log(std::exp(1.0) + std::exp(2.0) + std::exp(0.5)), 1e-6);
  for (int j = 5; j < 10; ++j) EXPECT_TRUE(std::isnan(y[j]) && std::isnan(ly[j]));
  // Cross entropy: -inf on non-target logits is fine.
  std::vector<int64_t> t = {2};
  float loss, lse;
  k::cross_entropy_forward<float>(1, n, x.data(), t.data(), kIgnore, &loss, &lse);
  EXPECT_NEAR(loss, -std::log(y[2]), 1e-5);
}

TEST(RowwiseKernels, InPlace) {
  const int64_t rows = 9, n = 130;
  const std::vector<float> x = as<float>(rand_vec(rows * n, 61)), dy = as<float>(rand_vec(rows * n, 62));
  const std::vector<float> w = as<float>(rand_vec(n, 63));
  std::vector<float> y(rows * n), dx(rows * n), rstd(rows), dw(n);
  k::softmax_forward<float>(rows, n, x.data(), y.data());
  std::vector<float> inplace = x;
  k::softmax_forward<float>(rows, n, inplace.data(), inplace.data());
  EXPECT_EQ(inplace, y);
  k::softmax_backward<float>(rows, n, y.data(), dy.data(), dx.data());
  inplace = dy;
  k::softmax_backward<float>(rows, n, y.data(), inplace.data(), inplace.data());
  EXPECT_EQ(inplace, dx);
  k::rms_norm_forward<float>(rows, n, x.data(), w.data(), kEps, y.data(), rstd.data());
  k::rms_norm_backward<float>(rows, n, x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data());
  std::vector<float> dw2(n);
  inplace = dy;
  k::rms_norm_backward<float>(rows, n, x.data(), w.data(), rstd.data(), inplace.data(), inplace.data(), dw2.data());
  EXPECT_EQ(inplace, dx);
  EXPECT_EQ(dw2, dw);
}

// ---- thread-count independence (bit for bit) ----------------------------------------------------------------
template <class T>
std::vector<std::vector<T>> run_all(int64_t rows, int64_t n) {
  const std::vector<T> x = as<T>(rand_vec(rows * n, 71)), dy = as<T>(rand_vec(rows * n, 72));
  const std::vector<T> w = as<T>(rand_vec(n, 73)), b = as<T>(rand_vec(n, 74)), g = as<T>(rand_vec(rows, 75));
  const auto t = rand_targets(rows, n, 76, true);
  std::vector<std::vector<T>> out;
  auto buf = [&](size_t sz) -> T* { return out.emplace_back(sz).data(); };
  T* y = buf(rows * n);
  k::softmax_forward<T>(rows, n, x.data(), y);
  k::softmax_backward<T>(rows, n, y, dy.data(), buf(rows * n));
  T* ly = buf(rows * n);
  k::log_softmax_forward<T>(rows, n, x.data(), ly);
  k::log_softmax_backward<T>(rows, n, ly, dy.data(), buf(rows * n));
  T* rs = buf(rows);
  k::rms_norm_forward<T>(rows, n, x.data(), w.data(), kEps, buf(rows * n), rs);
  k::rms_norm_backward<T>(rows, n, x.data(), w.data(), rs, dy.data(), buf(rows * n), buf(n));
  T *mu = buf(rows), *lrs = buf(rows);
  k::layer_norm_forward<T>(rows, n, x.data(), w.data(), b.data(), kEps, buf(rows * n), mu, lrs);
  k::layer_norm_backward<T>(rows, n, x.data(), w.data(), mu, lrs, dy.data(), buf(rows * n), buf(n), buf(n));
  T* lse = buf(rows);
  k::cross_entropy_forward<T>(rows, n, x.data(), t.data(), kIgnore, buf(rows), lse);
  k::cross_entropy_backward<T>(rows, n, x.data(), t.data(), kIgnore, lse, g.data(), buf(rows * n));
  return out;
}
template <class T>
void expect_thread_independent(int64_t rows, int64_t n) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = run_all<T>(rows, n);
  omp_set_num_threads(2);
  const auto two = run_all<T>(rows, n);
  omp_set_num_threads(3);
  const auto three = run_all<T>(rows, n);
  omp_set_num_threads(saved);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(0, std::memcmp(one[i].data(), two[i].data(), one[i].size() * sizeof(T))) << "output " << i;
    EXPECT_EQ(0, std::memcmp(one[i].data(), three[i].data(), one[i].size() * sizeof(T))) << "output " << i;
  }
}
TEST(RowwiseKernels, ThreadCountIndependent) {
  expect_thread_independent<float>(700, 1000);  // 22 chunks of 32 rows
  expect_thread_independent<float>(20000, 9);   // 254 chunks of 79 rows
  expect_thread_independent<double>(300, 257);
}

}  // namespace
