// The float64 references of the row-wise kernel tests (tests/ops/cpu/test_rowwise_kernels.cpp for the CPU kernels,
// tests/cuda_emu/test_rowwise_emulated.cpp for the CUDA ones on the CPU): softmax, log_softmax and their backward,
// RMSNorm and LayerNorm with their backward, and cross entropy, each the textbook formula over [rows, n].
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

namespace uoe::rowwise_reference {
namespace {

using Vec = std::vector<double>;
constexpr double kEps = 1e-5;        // the norms' epsilon
constexpr int64_t kIgnore = -100;    // cross entropy's ignore_index

void ref_softmax(int64_t rows, int64_t n, const Vec& x, Vec& y, bool log) {
  y.resize(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * n];
    const double m = *std::max_element(xr, xr + n);
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += std::exp(xr[j] - m);
    for (int64_t j = 0; j < n; ++j) y[r * n + j] = log ? xr[j] - m - std::log(s) : std::exp(xr[j] - m) / s;
  }
}
void ref_softmax_bwd(int64_t rows, int64_t n, const Vec& y, const Vec& dy, Vec& dx, bool log) {
  dx.resize(y.size());
  for (int64_t r = 0; r < rows; ++r) {
    double s = 0;
    for (int64_t j = 0; j < n; ++j) s += log ? dy[r * n + j] : dy[r * n + j] * y[r * n + j];
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = r * n + j;
      dx[i] = log ? dy[i] - std::exp(y[i]) * s : y[i] * (dy[i] - s);
    }
  }
}
// layer == false: RMSNorm (no mean subtraction, no bias).
void ref_norm(bool layer, int64_t rows, int64_t n, const Vec& x, const Vec* w, const Vec* b, Vec& y, Vec& mean,
              Vec& rstd) {
  y.resize(x.size());
  mean.assign(rows, 0);
  rstd.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    double mu = 0, v = 0;
    if (layer) {
      for (int64_t j = 0; j < n; ++j) mu += x[r * n + j];
      mu /= n;
    }
    for (int64_t j = 0; j < n; ++j) v += (x[r * n + j] - mu) * (x[r * n + j] - mu);
    const double rs = 1.0 / std::sqrt(v / n + kEps);
    mean[r] = mu;
    rstd[r] = rs;
    for (int64_t j = 0; j < n; ++j)
      y[r * n + j] = (x[r * n + j] - mu) * rs * (w ? (*w)[j] : 1.0) + (b ? (*b)[j] : 0.0);
  }
}
void ref_norm_bwd(bool layer, int64_t rows, int64_t n, const Vec& x, const Vec* w, const Vec& mean, const Vec& rstd,
                  const Vec& dy, Vec& dx, Vec& dw, Vec& db) {
  dx.resize(x.size());
  dw.assign(n, 0);
  db.assign(n, 0);
  for (int64_t r = 0; r < rows; ++r) {
    double sg = 0, sgx = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double g = dy[r * n + j] * (w ? (*w)[j] : 1.0), xh = (x[r * n + j] - mean[r]) * rstd[r];
      sg += g;
      sgx += g * xh;
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t i = r * n + j;
      const double g = dy[i] * (w ? (*w)[j] : 1.0), xh = (x[i] - mean[r]) * rstd[r];
      dx[i] = rstd[r] * (g - (layer ? sg / n : 0.0) - xh * sgx / n);
      dw[j] += dy[i] * xh;
      db[j] += dy[i];
    }
  }
}
void ref_ce(int64_t rows, int64_t v, const Vec& x, const std::vector<int64_t>& t, Vec& loss, Vec& lse) {
  loss.resize(rows);
  lse.resize(rows);
  for (int64_t r = 0; r < rows; ++r) {
    const double* xr = &x[r * v];
    const double m = *std::max_element(xr, xr + v);
    double s = 0;
    for (int64_t j = 0; j < v; ++j) s += std::exp(xr[j] - m);
    lse[r] = m + std::log(s);
    loss[r] = t[r] == kIgnore ? 0.0 : lse[r] - xr[t[r]];
  }
}

}  // namespace
}  // namespace uoe::rowwise_reference
