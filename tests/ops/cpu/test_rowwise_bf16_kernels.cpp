// The CPU row kernels' bfloat16 case (ops/kernels/rowwise.h): softmax, log_softmax, rms_norm, layer_norm and cross
// entropy on bfloat16 rows give (1) the float32 kernels' results on the same, widened values, rounded once, and
// (2) the float64 kernels' results (themselves checked against naive references in test_rowwise_kernels.cpp) to
// bfloat16 tolerance; odd sizes, in place, with and without norm parameters. Whichever UOE_SIMD clone this machine
// picks runs here; a build pinned to another ISA (-DUOE_PIN_ISA) runs that one against the same references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "ops/kernels/rowwise.h"

namespace uoe {
namespace {

namespace k = cpu;
using Bf = std::vector<BFloat16>;

const int64_t kRows[] = {1, 3, 67};
const int64_t kCols[] = {1, 15, 17, 33, 129, 1000, 9000};  // 9000: pieces of 4096 in cross entropy
constexpr double kEps = 1e-5;
constexpr int64_t kIgnore = -100;
constexpr double kBf16Tol = 1.0 / 128;  // two bfloat16 roundings (inputs are exact: only the output's is counted)

// Random bfloat16 values with |v| in [lo, hi] and a random sign.
Bf rand_bf16(int64_t n, uint32_t seed, float lo = 0.1f, float hi = 3.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(lo, hi);
  std::bernoulli_distribution sign(0.5);
  Bf v(static_cast<size_t>(n));
  for (auto& e : v) e = BFloat16(sign(rng) ? mag(rng) : -mag(rng));
  return v;
}
template <class T>
std::vector<T> widen(const Bf& v) {
  std::vector<T> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = T(float(v[i]));
  return out;
}
Bf round_bf16(const std::vector<float>& v) {
  Bf out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = BFloat16(v[i]);
  return out;
}
template <class T>
const T* or_null(const std::vector<T>& v, bool use) {
  return use ? v.data() : nullptr;
}

// bfloat16 results equal the float32 kernel's, rounded once.
void expect_same(const Bf& got, const std::vector<float>& f32, const std::string& what) {
  const Bf want = round_bf16(f32);
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i].bits != want[i].bits && ++bad <= 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << float(got[i]) << ", float32 kernel rounded " << float(want[i]);
  EXPECT_EQ(bad, 0) << what;
}
void expect_same(const std::vector<float>& got, const std::vector<float>& f32, const std::string& what) {
  EXPECT_EQ(got, f32) << what;
}
// |got - ref| <= tol (|ref| + max(max |ref|, min_scale)): results that cancel are judged against their terms' size.
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<double>& ref, double tol, const std::string& what,
                  double min_scale = 0) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double scale = min_scale;
  for (double r : ref) scale = std::max(scale, std::fabs(r));
  int bad = 0;
  for (size_t i = 0; i < ref.size(); ++i)
    if (!(std::fabs(double(float(got[i])) - ref[i]) <= tol * (std::fabs(ref[i]) + scale)) && ++bad <= 3)
      ADD_FAILURE() << what << " [" << i << "]: got " << float(got[i]) << " expected " << ref[i];
  EXPECT_EQ(bad, 0) << what;
}
std::string tag(const std::string& name, int64_t rows, int64_t n) {
  return name + " rows=" + std::to_string(rows) + " n=" + std::to_string(n);
}

// softmax or log_softmax, forward and backward, for elements of type T (bfloat16: the overload).
template <class T>
void softmax_fwd(bool log, int64_t rows, int64_t n, const T* x, T* y) {
  if (log) k::log_softmax_forward(rows, n, x, y);
  else k::softmax_forward(rows, n, x, y);
}
template <class T>
void softmax_bwd(bool log, int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  if (log) k::log_softmax_backward(rows, n, y, dy, dx);
  else k::softmax_backward(rows, n, y, dy, dx);
}

void run_softmax(bool log, int64_t rows, int64_t n) {
  const std::string name = log ? "log_softmax" : "softmax";
  const Bf x = rand_bf16(rows * n, uint32_t(1 + rows * 7 + n), 0.1f, 8.0f), dy = rand_bf16(rows * n, uint32_t(2 + n));
  Bf y(x.size()), dx(x.size());
  softmax_fwd(log, rows, n, x.data(), y.data());
  std::vector<float> yf(x.size()), dxf(x.size());
  std::vector<double> yd(x.size()), dxd(x.size());
  softmax_fwd(log, rows, n, widen<float>(x).data(), yf.data());
  softmax_fwd(log, rows, n, widen<double>(x).data(), yd.data());
  expect_same(y, yf, tag(name + " fwd", rows, n));
  expect_close(y, yd, kBf16Tol, tag(name + " fwd vs float64", rows, n));
  // Backward from the bfloat16 y (as the op saves it); the references read the same values.
  softmax_bwd(log, rows, n, y.data(), dy.data(), dx.data());
  softmax_bwd(log, rows, n, widen<float>(y).data(), widen<float>(dy).data(), dxf.data());
  softmax_bwd(log, rows, n, widen<double>(y).data(), widen<double>(dy).data(), dxd.data());
  expect_same(dx, dxf, tag(name + " bwd", rows, n));
  expect_close(dx, dxd, kBf16Tol, tag(name + " bwd vs float64", rows, n), 1e-3);
}

// The norm kernels for one element type: x, w, b, dy as T (or bfloat16), statistics and parameter gradients as S.
template <class T, class S>
struct NormRun {
  std::vector<T> y, dx;
  std::vector<S> mean, rstd, dw, db;
  NormRun(bool layer, int64_t rows, int64_t n, const std::vector<T>& x, const std::vector<T>& w,
          const std::vector<T>& b, const std::vector<T>& dy, bool with_w, bool with_b)
      : y(x.size()), dx(x.size()), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows)), dw(static_cast<size_t>(n)), db(static_cast<size_t>(n)) {
    if (layer) {
      k::layer_norm_forward(rows, n, x.data(), or_null(w, with_w), or_null(b, with_b), kEps, y.data(), mean.data(),
                            rstd.data());
      k::layer_norm_backward(rows, n, x.data(), or_null(w, with_w), mean.data(), rstd.data(), dy.data(), dx.data(),
                             dw.data(), with_b ? db.data() : nullptr);
    } else {
      k::rms_norm_forward(rows, n, x.data(), or_null(w, with_w), kEps, y.data(), rstd.data());
      k::rms_norm_backward(rows, n, x.data(), or_null(w, with_w), rstd.data(), dy.data(), dx.data(), dw.data());
    }
  }
};

void run_norm(bool layer, int64_t rows, int64_t n, bool with_w, bool with_b) {
  const std::string name = std::string(layer ? "layer_norm" : "rms_norm") + (with_w ? " w" : "") + (with_b ? " b" : "");
  const uint32_t seed = uint32_t(3 + rows * 5 + n);
  const Bf x = rand_bf16(rows * n, seed), dy = rand_bf16(rows * n, seed + 1);
  const Bf w = rand_bf16(n, seed + 2, 0.5f, 1.5f), b = rand_bf16(n, seed + 3);
  const NormRun<BFloat16, float> got(layer, rows, n, x, w, b, dy, with_w, with_b);
  const NormRun<float, float> f32(layer, rows, n, widen<float>(x), widen<float>(w), widen<float>(b),
                                  widen<float>(dy), with_w, with_b);
  const NormRun<double, double> f64(layer, rows, n, widen<double>(x), widen<double>(w), widen<double>(b),
                                    widen<double>(dy), with_w, with_b);
  expect_same(got.y, f32.y, tag(name + " y", rows, n));
  expect_same(got.rstd, f32.rstd, tag(name + " rstd", rows, n));
  expect_same(got.dx, f32.dx, tag(name + " dx", rows, n));
  expect_same(got.dw, f32.dw, tag(name + " dweight", rows, n));
  expect_close(got.y, f64.y, kBf16Tol, tag(name + " y vs float64", rows, n));
  expect_close(got.rstd, f64.rstd, 1e-5, tag(name + " rstd vs float64", rows, n));
  // dx = rstd * (terms of size |dy w| <= 4.5) that may cancel (n = 1: rstd ~ 1/sqrt(eps)).
  const double dx_terms = *std::max_element(f64.rstd.begin(), f64.rstd.end()) * 4.5;
  expect_close(got.dx, f64.dx, kBf16Tol, tag(name + " dx vs float64", rows, n), dx_terms);
  expect_close(got.dw, f64.dw, 1e-4, tag(name + " dweight vs float64", rows, n));
  if (layer) {
    expect_same(got.mean, f32.mean, tag(name + " mean", rows, n));
    expect_close(got.mean, f64.mean, 1e-5, tag(name + " mean vs float64", rows, n), 1.0);
  }
  if (layer && with_b) {
    expect_same(got.db, f32.db, tag(name + " dbias", rows, n));
    expect_close(got.db, f64.db, 1e-4, tag(name + " dbias vs float64", rows, n));
  }
}

void run_cross_entropy(int64_t rows, int64_t v) {
  const Bf x = rand_bf16(rows * v, uint32_t(7 + rows * 3 + v), 0.1f, 6.0f);
  std::mt19937 rng(uint32_t(9 + rows + v));
  std::vector<int64_t> t(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) t[size_t(r)] = r % 3 == 1 ? kIgnore : int64_t(rng() % uint64_t(v));
  const std::vector<float> scale = widen<float>(rand_bf16(rows, uint32_t(8 + rows)));
  std::vector<float> loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows)), loss32(static_cast<size_t>(rows)), lse32(static_cast<size_t>(rows));
  std::vector<double> loss64(static_cast<size_t>(rows)), lse64(static_cast<size_t>(rows)), d64(x.size());
  Bf d(x.size());
  std::vector<float> d32(x.size());
  k::cross_entropy_forward_checked(rows, v, x.data(), t.data(), kIgnore, loss.data(), lse.data());
  k::cross_entropy_forward<float>(rows, v, widen<float>(x).data(), t.data(), kIgnore, loss32.data(), lse32.data());
  k::cross_entropy_forward<double>(rows, v, widen<double>(x).data(), t.data(), kIgnore, loss64.data(), lse64.data());
  expect_same(loss, loss32, tag("cross_entropy loss", rows, v));
  expect_same(lse, lse32, tag("cross_entropy lse", rows, v));
  expect_close(loss, loss64, 1e-5, tag("cross_entropy loss vs float64", rows, v), 1.0);
  k::cross_entropy_backward(rows, v, x.data(), t.data(), kIgnore, lse.data(), scale.data(), d.data());
  k::cross_entropy_backward<float>(rows, v, widen<float>(x).data(), t.data(), kIgnore, lse.data(), scale.data(),
                                   d32.data());
  const std::vector<double> scale64(scale.begin(), scale.end());
  k::cross_entropy_backward<double>(rows, v, widen<double>(x).data(), t.data(), kIgnore, lse64.data(),
                                    scale64.data(), d64.data());
  expect_same(d, d32, tag("cross_entropy dlogits", rows, v));
  expect_close(d, d64, kBf16Tol, tag("cross_entropy dlogits vs float64", rows, v));
}

TEST(RowwiseBf16Kernels, SoftmaxAndLogSoftmaxMatchFloat32AndFloat64) {
  for (int64_t rows : kRows)
    for (int64_t n : kCols)
      for (bool log : {false, true}) run_softmax(log, rows, n);
}
TEST(RowwiseBf16Kernels, NormsMatchFloat32AndFloat64) {
  for (int64_t rows : kRows)
    for (int64_t n : kCols)
      for (bool layer : {false, true})
        for (int variant = 0; variant < 3; ++variant)  // weight+bias, weight only, neither
          run_norm(layer, rows, n, variant < 2, variant == 0);
}
TEST(RowwiseBf16Kernels, CrossEntropyMatchesFloat32AndFloat64) {
  for (int64_t rows : kRows)
    for (int64_t v : kCols) run_cross_entropy(rows, v);
}

TEST(RowwiseBf16Kernels, InPlace) {
  const int64_t rows = 9, n = 130;
  const Bf x = rand_bf16(rows * n, 61), dy = rand_bf16(rows * n, 62), w = rand_bf16(n, 63);
  Bf y(x.size()), dx(x.size());
  k::log_softmax_forward(rows, n, x.data(), y.data());
  Bf inplace = x;
  k::log_softmax_forward(rows, n, inplace.data(), inplace.data());
  EXPECT_TRUE(std::equal(inplace.begin(), inplace.end(), y.begin(), [](auto a, auto b) { return a.bits == b.bits; }));
  std::vector<float> rstd(rows), dw(n), dw2(n);
  k::rms_norm_forward(rows, n, x.data(), w.data(), kEps, y.data(), rstd.data());
  k::rms_norm_backward(rows, n, x.data(), w.data(), rstd.data(), dy.data(), dx.data(), dw.data());
  inplace = dy;
  k::rms_norm_backward(rows, n, x.data(), w.data(), rstd.data(), inplace.data(), inplace.data(), dw2.data());
  EXPECT_TRUE(std::equal(inplace.begin(), inplace.end(), dx.begin(), [](auto a, auto b) { return a.bits == b.bits; }));
  EXPECT_EQ(dw2, dw);
}

}  // namespace
}  // namespace uoe
