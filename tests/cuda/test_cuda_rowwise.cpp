// CUDA row-wise and RoPE kernels against their CPU twins (same inputs, results within rounding); every shape class
// of the launch (warp / block per row, vector / scalar loads), in place, null pointers, non-finite rows, bad targets
// and determinism. Skips without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"
#include "ops/kernels/rope.h"
#include "ops/kernels/rowwise.h"

namespace uoe {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// (rows, n): a warp per row (scalar and vector loads), blocks of 128 / 256 / 512 threads, odd lengths, many rows.
const std::vector<std::pair<int64_t, int64_t>> kShapes = {{1, 1},    {3, 7},     {5, 256},  {4, 1000}, {3, 4096},
                                                          {2, 5000}, {2, 50304}, {3, 1001}, {2, 9999}, {1000, 64}};

template <class T>
std::vector<T> randn_vec(size_t n, unsigned seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<T> v(n);
  for (T& x : v) x = T(dist(gen));
  return v;
}

template <class T>
Tensor dev(const std::vector<T>& v) {
  return from_vector(v, {int64_t(v.size())}).to(Device::cuda(0));
}
// A device buffer of n elements filled with NaN: whatever a kernel does not write stays NaN.
template <class T>
Tensor poisoned(size_t n) {
  return full({int64_t(n)}, kNaN, TensorOptions{}.with_dtype(dtype_of<T>()).with_device(Device::cuda(0)));
}
template <class T>
std::vector<T> host(const Tensor& t) {
  cuda::synchronize(0, "test");  // surfaces asynchronous kernel errors here
  return t.to(Device::cpu()).to_vector<T>();
}
template <class T>
T* ptr(const Tensor& t) {
  return t.data_ptr<T>();
}

template <class T>
double tolerance() {
  return sizeof(T) == 4 ? 2e-5 : 1e-12;
}

// ||got - want|| <= tol ||want|| + floor; NaN and infinities must match exactly (a NaN in got where want is finite
// means an element was not written or went wrong).
template <class T>
void expect_close(const std::vector<T>& got, const std::vector<T>& want, const std::string& what,
                  double tol = tolerance<T>(), double floor = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double num = 0, den = 0;
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = double(got[i]), w = double(want[i]);
    if (std::isnan(w) || std::isinf(w) || std::isnan(g) || std::isinf(g)) {
      const bool same = (std::isnan(w) && std::isnan(g)) || g == w;
      if (!same && bad++ == 0) first = int64_t(i);
      continue;
    }
    num += (g - w) * (g - w);
    den += w * w;
  }
  EXPECT_EQ(bad, 0) << what << ": non-finite mismatch, first at " << first << " (got " << double(got[size_t(first)])
                    << ", want " << double(want[size_t(first)]) << ")";
  EXPECT_LE(std::sqrt(num), tol * std::sqrt(den) + floor + 1e-30) << what;
}

// A normalisation's dx is a difference of terms of size rstd |w dy| that cancel where a row has few elements (all of
// it in a row of one, where LayerNorm's dx is 0 and RMSNorm's rstd w dy eps / (x^2 + eps)): rounding errors are
// relative to those terms, not to dx. tol ||rstd w dy|| (w = 1 when null) bounds them.
template <class T>
double dx_floor(int64_t rows, int64_t n, const std::vector<T>& rstd, const T* w, const std::vector<T>& dy) {
  double sq = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < n; ++j) {
      const double term = double(rstd[size_t(r)]) * (w ? double(w[j]) : 1.0) * double(dy[size_t(r * n + j)]);
      sq += term * term;
    }
  return tolerance<T>() * std::sqrt(sq);
}

template <class T>
class CudaRowwise : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: CUDA kernel tests skipped";
  }
};
using Floats = ::testing::Types<float, double>;
TYPED_TEST_SUITE(CudaRowwise, Floats);

std::string shape_name(int64_t rows, int64_t n) { return "[" + std::to_string(rows) + ", " + std::to_string(n) + "]"; }

TYPED_TEST(CudaRowwise, SoftmaxAndLogSoftmaxMatchCpu) {
  using T = TypeParam;
  unsigned seed = 1;
  for (auto [rows, n] : kShapes) {
    const size_t sz = size_t(rows * n);
    const std::vector<T> x = randn_vec<T>(sz, seed++, 3.0), dy = randn_vec<T>(sz, seed++);
    for (bool log : {false, true}) {
      const std::string what = std::string(log ? "log_softmax " : "softmax ") + shape_name(rows, n);
      std::vector<T> y(sz), dx(sz);
      if (log)
        cpu::log_softmax_forward(rows, n, x.data(), y.data());
      else
        cpu::softmax_forward(rows, n, x.data(), y.data());
      if (log)
        cpu::log_softmax_backward(rows, n, y.data(), dy.data(), dx.data());
      else
        cpu::softmax_backward(rows, n, y.data(), dy.data(), dx.data());

      const Tensor dx_in = dev(x), d_y = poisoned<T>(sz);
      if (log)
        cuda::log_softmax_forward(rows, n, ptr<T>(dx_in), ptr<T>(d_y));
      else
        cuda::softmax_forward(rows, n, ptr<T>(dx_in), ptr<T>(d_y));
      expect_close(host<T>(d_y), y, what + " forward");
      // backward from the CPU's y, so that only the backward is compared
      const Tensor d_yc = dev(y), d_dy = dev(dy), d_dx = poisoned<T>(sz);
      if (log)
        cuda::log_softmax_backward(rows, n, ptr<T>(d_yc), ptr<T>(d_dy), ptr<T>(d_dx));
      else
        cuda::softmax_backward(rows, n, ptr<T>(d_yc), ptr<T>(d_dy), ptr<T>(d_dx));
      expect_close(host<T>(d_dx), dx, what + " backward");
      // in place: y == x, dx == dy
      if (log)
        cuda::log_softmax_forward(rows, n, ptr<T>(dx_in), ptr<T>(dx_in));
      else
        cuda::softmax_forward(rows, n, ptr<T>(dx_in), ptr<T>(dx_in));
      expect_close(host<T>(dx_in), y, what + " forward in place");
      if (log)
        cuda::log_softmax_backward(rows, n, ptr<T>(d_yc), ptr<T>(d_dy), ptr<T>(d_dy));
      else
        cuda::softmax_backward(rows, n, ptr<T>(d_yc), ptr<T>(d_dy), ptr<T>(d_dy));
      expect_close(host<T>(d_dy), dx, what + " backward in place");
    }
  }
}

TYPED_TEST(CudaRowwise, MisalignedPointersTakeTheScalarPath) {
  // n is a multiple of every vector width, but the pointers are one element past a 16-byte boundary: the kernels
  // must fall back to scalar loads (a vector load there is a misaligned-address fault).
  using T = TypeParam;
  const int64_t rows = 3, n = 1024;
  const size_t sz = size_t(rows * n);
  const std::vector<T> x = randn_vec<T>(sz + 1, 77, 3.0), w = randn_vec<T>(size_t(n) + 1, 78);
  const std::vector<T> xs(x.begin() + 1, x.end()), ws(w.begin() + 1, w.end());
  std::vector<T> y(sz), y2(sz), rstd(static_cast<size_t>(rows));
  cpu::softmax_forward(rows, n, xs.data(), y.data());
  cpu::rms_norm_forward(rows, n, xs.data(), ws.data(), 1e-5, y2.data(), rstd.data());
  const Tensor d_x = dev(x), d_w = dev(w), d_y = poisoned<T>(sz + 1), d_y2 = poisoned<T>(sz + 1);
  cuda::softmax_forward(rows, n, ptr<T>(d_x) + 1, ptr<T>(d_y) + 1);
  cuda::rms_norm_forward(rows, n, ptr<T>(d_x) + 1, ptr<T>(d_w) + 1, 1e-5, ptr<T>(d_y2) + 1, static_cast<T*>(nullptr));
  const std::vector<T> got = host<T>(d_y), got2 = host<T>(d_y2);
  EXPECT_TRUE(std::isnan(double(got[0])) && std::isnan(double(got2[0])));  // nothing written before the start
  expect_close(std::vector<T>(got.begin() + 1, got.end()), y, "softmax, misaligned pointers");
  expect_close(std::vector<T>(got2.begin() + 1, got2.end()), y2, "rms_norm, misaligned pointers");
}

TYPED_TEST(CudaRowwise, NonFiniteRowsGiveNaNLikeTheCpu) {
  using T = TypeParam;
  for (int64_t n : {5, 64, 3000}) {
    const int64_t rows = 5;
    std::vector<T> x = randn_vec<T>(size_t(rows * n), 7);
    for (int64_t j = 0; j < n; ++j) x[size_t(0 * n + j)] = T(-kInf);  // row 0: all -inf -> NaN
    x[size_t(1 * n + n / 2)] = T(-kInf);                              // row 1: one -inf -> probability 0
    x[size_t(2 * n + n - 1)] = T(kInf);                               // row 2: +inf -> NaN
    x[size_t(3 * n)] = T(kNaN);                                       // row 3: NaN -> NaN
    for (bool log : {false, true}) {
      std::vector<T> y(x.size());
      if (log)
        cpu::log_softmax_forward(rows, n, x.data(), y.data());
      else
        cpu::softmax_forward(rows, n, x.data(), y.data());
      const Tensor d_x = dev(x), d_y = poisoned<T>(x.size());
      if (log)
        cuda::log_softmax_forward(rows, n, ptr<T>(d_x), ptr<T>(d_y));
      else
        cuda::softmax_forward(rows, n, ptr<T>(d_x), ptr<T>(d_y));
      const std::vector<T> got = host<T>(d_y);
      expect_close(got, y, std::string(log ? "log_softmax" : "softmax") + " non-finite n=" + std::to_string(n));
      EXPECT_TRUE(std::isnan(double(got[0])));
      EXPECT_FALSE(std::isnan(double(got[size_t(n + n / 2)])));
    }
    // cross entropy on the same rows: lse and loss NaN on rows 0, 2, 3; the gradient NaN there too
    std::vector<int64_t> t = {0, 1, 0, 1, int64_t(n - 1)};
    std::vector<T> loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows)),
        scale(static_cast<size_t>(rows), T(0.5)), dl(x.size());
    cpu::cross_entropy_forward(rows, n, x.data(), t.data(), -100, loss.data(), lse.data());
    cpu::cross_entropy_backward(rows, n, x.data(), t.data(), -100, lse.data(), scale.data(), dl.data());
    const Tensor d_x = dev(x), d_t = dev(t), d_loss = poisoned<T>(static_cast<size_t>(rows)),
                 d_lse = poisoned<T>(static_cast<size_t>(rows));
    cuda::cross_entropy_forward(rows, n, ptr<T>(d_x), ptr<int64_t>(d_t), -100, ptr<T>(d_loss), ptr<T>(d_lse));
    expect_close(host<T>(d_lse), lse, "cross_entropy lse non-finite");
    expect_close(host<T>(d_loss), loss, "cross_entropy loss non-finite");
    const Tensor d_scale = dev(scale), d_dl = poisoned<T>(x.size());
    cuda::cross_entropy_backward(rows, n, ptr<T>(d_x), ptr<int64_t>(d_t), -100, ptr<T>(d_lse), ptr<T>(d_scale),
                                 ptr<T>(d_dl));
    expect_close(host<T>(d_dl), dl, "cross_entropy backward non-finite");
  }
}

TYPED_TEST(CudaRowwise, RmsNormMatchesCpuWithAndWithoutWeight) {
  using T = TypeParam;
  unsigned seed = 100;
  const double eps = 1e-5;
  for (auto [rows, n] : kShapes) {
    const size_t sz = size_t(rows * n);
    const std::vector<T> x = randn_vec<T>(sz, seed++), w = randn_vec<T>(size_t(n), seed++),
                         dy = randn_vec<T>(sz, seed++);
    for (bool has_w : {true, false}) {
      const std::string what = "rms_norm " + shape_name(rows, n) + (has_w ? " weight" : " no weight");
      const T* pw = has_w ? w.data() : nullptr;
      std::vector<T> y(sz), rstd(static_cast<size_t>(rows)), dx(sz), dw(static_cast<size_t>(n));
      cpu::rms_norm_forward(rows, n, x.data(), pw, eps, y.data(), rstd.data());
      cpu::rms_norm_backward(rows, n, x.data(), pw, rstd.data(), dy.data(), dx.data(), dw.data());

      const Tensor d_x = dev(x), d_w = dev(w), d_dy = dev(dy);
      const Tensor d_y = poisoned<T>(sz), d_rstd = poisoned<T>(static_cast<size_t>(rows));
      cuda::rms_norm_forward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, eps, ptr<T>(d_y), ptr<T>(d_rstd));
      expect_close(host<T>(d_y), y, what + " y");
      expect_close(host<T>(d_rstd), rstd, what + " rstd");
      const Tensor d_y2 = poisoned<T>(sz);  // rstd null (inference)
      cuda::rms_norm_forward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, eps, ptr<T>(d_y2),
                             static_cast<T*>(nullptr));
      expect_close(host<T>(d_y2), y, what + " y without rstd");

      const Tensor d_rs = dev(rstd), d_dx = poisoned<T>(sz), d_dw = poisoned<T>(static_cast<size_t>(n));
      cuda::rms_norm_backward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, ptr<T>(d_rs), ptr<T>(d_dy),
                              ptr<T>(d_dx), ptr<T>(d_dw));
      const double floor = dx_floor(rows, n, rstd, pw, dy);
      expect_close(host<T>(d_dx), dx, what + " dx", tolerance<T>(), floor);
      const std::vector<T> dw1 = host<T>(d_dw);
      expect_close(dw1, dw, what + " dweight");
      // again, without dweight and in place (dx == dy); then dweight again: bit-identical (deterministic)
      const Tensor d_g = dev(dy);
      cuda::rms_norm_backward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, ptr<T>(d_rs), ptr<T>(d_g),
                              ptr<T>(d_g), static_cast<T*>(nullptr));
      expect_close(host<T>(d_g), dx, what + " dx in place, no dweight", tolerance<T>(), floor);
      const Tensor d_dx2 = poisoned<T>(sz), d_dw2 = poisoned<T>(static_cast<size_t>(n));
      cuda::rms_norm_backward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, ptr<T>(d_rs), ptr<T>(d_dy),
                              ptr<T>(d_dx2), ptr<T>(d_dw2));
      EXPECT_EQ(host<T>(d_dw2), dw1) << what << ": dweight differs between two runs";
    }
  }
}

TYPED_TEST(CudaRowwise, LayerNormMatchesCpuForEveryParameterCombination) {
  using T = TypeParam;
  unsigned seed = 200;
  const double eps = 1e-5;
  for (auto [rows, n] : kShapes) {
    const size_t sz = size_t(rows * n);
    std::vector<T> x = randn_vec<T>(sz, seed++);
    for (T& v : x) v += T(2);  // a mean far from 0 exercises the two-pass variance
    const std::vector<T> w = randn_vec<T>(size_t(n), seed++), b = randn_vec<T>(size_t(n), seed++),
                         dy = randn_vec<T>(sz, seed++);
    for (int mask = 0; mask < 4; ++mask) {
      const bool has_w = mask & 1, has_b = mask & 2;
      const std::string what = "layer_norm " + shape_name(rows, n) + " mask " + std::to_string(mask);
      const T *pw = has_w ? w.data() : nullptr, *pb = has_b ? b.data() : nullptr;
      std::vector<T> y(sz), mean(static_cast<size_t>(rows)), rstd(static_cast<size_t>(rows)), dx(sz),
          dw(static_cast<size_t>(n)), db(static_cast<size_t>(n));
      cpu::layer_norm_forward(rows, n, x.data(), pw, pb, eps, y.data(), mean.data(), rstd.data());
      cpu::layer_norm_backward(rows, n, x.data(), pw, mean.data(), rstd.data(), dy.data(), dx.data(), dw.data(),
                               db.data());

      const Tensor d_x = dev(x), d_w = dev(w), d_b = dev(b), d_dy = dev(dy);
      const Tensor d_y = poisoned<T>(sz), d_mean = poisoned<T>(static_cast<size_t>(rows)),
                   d_rstd = poisoned<T>(static_cast<size_t>(rows));
      cuda::layer_norm_forward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, has_b ? ptr<T>(d_b) : nullptr, eps,
                               ptr<T>(d_y), ptr<T>(d_mean), ptr<T>(d_rstd));
      expect_close(host<T>(d_y), y, what + " y");
      expect_close(host<T>(d_mean), mean, what + " mean");
      expect_close(host<T>(d_rstd), rstd, what + " rstd");

      const Tensor d_mu = dev(mean), d_rs = dev(rstd);
      const Tensor d_dx = poisoned<T>(sz), d_dw = poisoned<T>(static_cast<size_t>(n)),
                   d_db = poisoned<T>(static_cast<size_t>(n));
      cuda::layer_norm_backward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, ptr<T>(d_mu), ptr<T>(d_rs),
                                ptr<T>(d_dy), ptr<T>(d_dx), ptr<T>(d_dw), ptr<T>(d_db));
      const double floor = dx_floor(rows, n, rstd, pw, dy);
      expect_close(host<T>(d_dx), dx, what + " dx", tolerance<T>(), floor);
      expect_close(host<T>(d_dw), dw, what + " dweight");
      expect_close(host<T>(d_db), db, what + " dbias");
      // only dbias wanted, in place
      const Tensor d_g = dev(dy), d_db2 = poisoned<T>(static_cast<size_t>(n));
      cuda::layer_norm_backward(rows, n, ptr<T>(d_x), has_w ? ptr<T>(d_w) : nullptr, ptr<T>(d_mu), ptr<T>(d_rs),
                                ptr<T>(d_g), ptr<T>(d_g), static_cast<T*>(nullptr), ptr<T>(d_db2));
      expect_close(host<T>(d_g), dx, what + " dx in place", tolerance<T>(), floor);
      expect_close(host<T>(d_db2), db, what + " dbias alone");
    }
  }
}

TYPED_TEST(CudaRowwise, CrossEntropyMatchesCpuWithIgnoredRows) {
  using T = TypeParam;
  unsigned seed = 300;
  const int64_t ignore = -100;
  for (auto [rows, vocab] : kShapes) {
    const size_t sz = size_t(rows * vocab);
    const std::vector<T> x = randn_vec<T>(sz, seed++, 4.0), sc = randn_vec<T>(size_t(rows), seed++);
    std::mt19937 gen(seed++);
    std::vector<int64_t> t(static_cast<size_t>(rows));
    int64_t counted = 0;
    for (int64_t r = 0; r < rows; ++r) {
      t[size_t(r)] = (r % 3 == 1) ? ignore : int64_t(gen() % uint64_t(vocab));
      counted += t[size_t(r)] != ignore;
    }
    const std::string what = "cross_entropy " + shape_name(rows, vocab);
    std::vector<T> loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows)), dl(sz);
    cpu::cross_entropy_forward(rows, vocab, x.data(), t.data(), ignore, loss.data(), lse.data());
    cpu::cross_entropy_backward(rows, vocab, x.data(), t.data(), ignore, lse.data(), sc.data(), dl.data());

    const Tensor d_x = dev(x), d_t = dev(t), d_loss = poisoned<T>(static_cast<size_t>(rows)),
                 d_lse = poisoned<T>(static_cast<size_t>(rows));
    const cuda::TargetCheck c = cuda::cross_entropy_forward_checked(rows, vocab, ptr<T>(d_x), ptr<int64_t>(d_t), ignore,
                                                                    ptr<T>(d_loss), ptr<T>(d_lse));
    EXPECT_EQ(c.bad_row, -1) << what;
    EXPECT_EQ(c.count, counted) << what;
    expect_close(host<T>(d_loss), loss, what + " loss_per_row");
    expect_close(host<T>(d_lse), lse, what + " lse");

    const Tensor d_lse_c = dev(lse), d_sc = dev(sc), d_dl = poisoned<T>(sz);
    cuda::cross_entropy_backward(rows, vocab, ptr<T>(d_x), ptr<int64_t>(d_t), ignore, ptr<T>(d_lse_c), ptr<T>(d_sc),
                                 ptr<T>(d_dl));
    expect_close(host<T>(d_dl), dl, what + " dlogits");
    cuda::cross_entropy_backward(rows, vocab, ptr<T>(d_x), ptr<int64_t>(d_t), ignore, ptr<T>(d_lse_c), ptr<T>(d_sc),
                                 ptr<T>(d_x));  // in place: dlogits == logits
    expect_close(host<T>(d_x), dl, what + " dlogits in place");

    // the op's helpers: mean over counted rows in double, the per-row scale from a device scalar
    double total = 0;
    for (T v : loss) total += double(v);
    const Tensor d_per_row = dev(loss), d_mean = poisoned<T>(1), d_g = dev(std::vector<T>{T(3)});
    cuda::cross_entropy_mean_loss(rows, ptr<T>(d_per_row), counted, ptr<T>(d_mean));
    expect_close(host<T>(d_mean), std::vector<T>{T(counted ? total / double(counted) : 0.0)}, what + " mean");
    const Tensor d_rs = poisoned<T>(static_cast<size_t>(rows));
    cuda::cross_entropy_row_scale(rows, ptr<T>(d_g), std::max<int64_t>(counted, 1), ptr<T>(d_rs));
    EXPECT_EQ(host<T>(d_rs), std::vector<T>(size_t(rows), T(3.0 / double(std::max<int64_t>(counted, 1)))));
  }
}

class CudaRowwiseBf16 : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible: CUDA kernel tests skipped";
  }
};

TEST_F(CudaRowwiseBf16, CrossEntropyMatchesTheFloat32CpuOnTheSameValues) {
  // bfloat16 logits read as they are: loss and lse in float32 as the CPU's float32 kernels give them on the
  // widened values; dlogits rounded once to bfloat16.
  unsigned seed = 500;
  const int64_t ignore = -100;
  for (auto [rows, vocab] : kShapes) {
    const size_t sz = size_t(rows * vocab);
    const Tensor x16 = from_vector(randn_vec<float>(sz, seed++, 4.0), {int64_t(sz)}).to(DType::BFloat16);
    const std::vector<float> x = x16.to(DType::Float32).to_vector<float>(), sc = randn_vec<float>(size_t(rows), seed++);
    std::vector<int64_t> t(static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) t[size_t(r)] = (r % 3 == 1) ? ignore : (r * 7919 + 13) % vocab;
    const std::string what = "bf16 cross_entropy " + shape_name(rows, vocab);
    std::vector<float> loss(static_cast<size_t>(rows)), lse(static_cast<size_t>(rows)), dl(sz);
    cpu::cross_entropy_forward(rows, vocab, x.data(), t.data(), ignore, loss.data(), lse.data());
    cpu::cross_entropy_backward(rows, vocab, x.data(), t.data(), ignore, lse.data(), sc.data(), dl.data());

    const Tensor d_x = x16.to(Device::cuda(0)), d_t = dev(t), d_loss = poisoned<float>(size_t(rows)),
                 d_lse = poisoned<float>(size_t(rows));
    const cuda::TargetCheck c = cuda::cross_entropy_forward_checked(
        rows, vocab, ptr<BFloat16>(d_x), ptr<int64_t>(d_t), ignore, ptr<float>(d_loss), ptr<float>(d_lse));
    EXPECT_EQ(c.bad_row, -1) << what;
    expect_close(host<float>(d_loss), loss, what + " loss_per_row");
    expect_close(host<float>(d_lse), lse, what + " lse");

    const Tensor d_lse_c = dev(lse), d_sc = dev(sc);
    Tensor d_dl = full({int64_t(sz)}, kNaN, TensorOptions{}.with_dtype(DType::BFloat16).with_device(Device::cuda(0)));
    cuda::cross_entropy_backward(rows, vocab, ptr<BFloat16>(d_x), ptr<int64_t>(d_t), ignore, ptr<float>(d_lse_c),
                                 ptr<float>(d_sc), ptr<BFloat16>(d_dl));
    expect_close(host<float>(d_dl.to(DType::Float32)), dl, what + " dlogits", 1e-2);
  }
}

TYPED_TEST(CudaRowwise, CrossEntropyBadTargetThrowsAndWritesNothing) {
  using T = TypeParam;
  const int64_t rows = 4, vocab = 5;
  const std::vector<T> x = randn_vec<T>(size_t(rows * vocab), 9);
  for (int64_t bad : {int64_t(5), int64_t(-1)}) {
    const std::vector<int64_t> t = {0, -100, bad, 7};
    const Tensor d_x = dev(x), d_t = dev(t), d_loss = poisoned<T>(static_cast<size_t>(rows)),
                 d_lse = poisoned<T>(static_cast<size_t>(rows));
    try {
      cuda::cross_entropy_forward(rows, vocab, ptr<T>(d_x), ptr<int64_t>(d_t), -100, ptr<T>(d_loss), ptr<T>(d_lse));
      FAIL() << "expected std::out_of_range";
    } catch (const std::out_of_range& e) {
      const std::string want = "cross_entropy_forward: target " + std::to_string(bad) +
                               " at row 2 is out of range for vocab size 5 (valid: [0, 5) or ignore_index -100)";
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
    for (T v : host<T>(d_loss)) EXPECT_TRUE(std::isnan(double(v)));
    for (T v : host<T>(d_lse)) EXPECT_TRUE(std::isnan(double(v)));
    const cuda::TargetCheck c = cuda::cross_entropy_forward_checked(rows, vocab, ptr<T>(d_x), ptr<int64_t>(d_t), -100,
                                                                    ptr<T>(d_loss), ptr<T>(d_lse));
    EXPECT_EQ(c.bad_row, 2);
    EXPECT_EQ(c.bad_target, bad);

    const Tensor d_dl = poisoned<T>(x.size()), d_ones = dev(std::vector<T>(size_t(rows), T(1)));
    EXPECT_THROW(cuda::cross_entropy_backward(rows, vocab, ptr<T>(d_x), ptr<int64_t>(d_t), -100, ptr<T>(d_ones),
                                              ptr<T>(d_ones), ptr<T>(d_dl)),
                 std::out_of_range);
    for (T v : host<T>(d_dl)) EXPECT_TRUE(std::isnan(double(v)));
  }
}

TYPED_TEST(CudaRowwise, RopeMatchesCpu) {
  using T = TypeParam;
  unsigned seed = 400;
  for (Shape s : {Shape{2, 5, 3, 8}, Shape{1, 17, 2, 64}, Shape{3, 4, 2, 6}, Shape{2, 33, 4, 128}, Shape{1, 1, 1, 2}}) {
    const Tensor x = from_vector(randn_vec<T>(size_t(shape_numel(s)), seed++), s);
    for (bool inverse : {false, true})
      for (int64_t offset : {int64_t(0), int64_t(1000)}) {
        const Tensor want = cpu::rope(x, 10000.0, offset, inverse);
        const Tensor got = cuda::rope(x.to(Device::cuda(0)), 10000.0, offset, inverse);
        EXPECT_TRUE(got.is_cuda());
        expect_close(host<T>(got), want.to_vector<T>(),
                     "rope " + shape_str(s) + (inverse ? " inverse" : "") + " offset " + std::to_string(offset));
      }
  }
}

TEST_F(CudaRowwiseBf16, RopeOnBfloat16MatchesTheFloat32CpuRounded) {
  // bfloat16 rows rotated in float32 and rounded once: the CPU's float32 rotation of the same values, rounded.
  unsigned seed = 450;
  for (Shape s : {Shape{2, 5, 3, 8}, Shape{1, 17, 2, 64}, Shape{3, 4, 2, 6}, Shape{2, 33, 4, 128}}) {
    const Tensor x = from_vector(randn_vec<float>(size_t(shape_numel(s)), seed++), s).to(DType::BFloat16);
    for (bool inverse : {false, true}) {
      const Tensor want = cpu::rope(x.to(DType::Float32), 10000.0, 7, inverse).to(DType::BFloat16);
      const Tensor got = cuda::rope(x.to(Device::cuda(0)), 10000.0, 7, inverse);
      ASSERT_EQ(got.dtype(), DType::BFloat16);
      expect_close(host<float>(got.to(DType::Float32)), want.to(DType::Float32).to_vector<float>(),
                   "bf16 rope " + shape_str(s) + (inverse ? " inverse" : ""), 1e-2);
    }
  }
}

TYPED_TEST(CudaRowwise, EmptyShapesWriteNothing) {
  using T = TypeParam;
  const Tensor d_y = poisoned<T>(4);
  cuda::softmax_forward(0, 4, ptr<T>(d_y), ptr<T>(d_y));
  cuda::rms_norm_forward(4, 0, ptr<T>(d_y), static_cast<const T*>(nullptr), 1e-5, ptr<T>(d_y), ptr<T>(d_y));
  cuda::layer_norm_backward(0, 4, ptr<T>(d_y), static_cast<const T*>(nullptr), ptr<T>(d_y), ptr<T>(d_y), ptr<T>(d_y),
                            ptr<T>(d_y), ptr<T>(d_y), ptr<T>(d_y));
  cuda::cross_entropy_forward(0, 4, ptr<T>(d_y), static_cast<const int64_t*>(nullptr), -100, ptr<T>(d_y), ptr<T>(d_y));
  for (T v : host<T>(d_y)) EXPECT_TRUE(std::isnan(double(v)));
}

}  // namespace
}  // namespace uoe
