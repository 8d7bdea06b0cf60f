// The float64 reference of the CPU fused attention kernel tests (test_attention_kernels.cpp, test_attention_bf16.cpp):
// random problems in either memory layout, a naive full-score-matrix forward and backward, and the normwise error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "ops/kernels/attention.h"

namespace uoe::cpu {
namespace {

enum class Layout { BHTD, BTHD };  // contiguous [B,H,T,Dh], or a [B,T,H,Dh] buffer viewed as [B,H,T,Dh]

AttnStrides strides_for(Layout l, int64_t H, int64_t T, int64_t Dh) {
  return l == Layout::BHTD ? AttnStrides{H * T * Dh, T * Dh, Dh} : AttnStrides{T * H * Dh, Dh, H * Dh};
}

int64_t at(const AttnStrides& s, int64_t b, int64_t h, int64_t t, int64_t d) {
  return b * s.batch + h * s.head + t * s.time + d;
}

// Inputs of one problem, stored in its layout (q/out/dout/dq: H heads, k/v/dk/dv: Hkv heads).
struct Problem {
  AttnShape s;
  AttnStrides qs, kvs;
  std::vector<double> q, k, v, dout;
};

// Random values in ±[0.1, 1] (never zero, so a missing term cannot hide).
std::vector<double> random_vec(size_t n, std::mt19937& rng) {
  std::uniform_real_distribution<double> mag(0.1, 1.0);
  std::bernoulli_distribution sign(0.5);
  std::vector<double> x(n);
  for (double& e : x) e = sign(rng) ? mag(rng) : -mag(rng);
  return x;
}

Problem make_problem(int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t Dh, bool causal, Layout layout,
                     unsigned seed, double scale_mult = 1.0) {
  Problem p;
  p.s = AttnShape{B, H, Hkv, T, Dh, scale_mult / std::sqrt(double(Dh)), causal};
  p.qs = strides_for(layout, H, T, Dh);
  p.kvs = strides_for(layout, Hkv, T, Dh);
  std::mt19937 rng(seed);
  p.q = random_vec(size_t(B * H * T * Dh), rng);
  p.k = random_vec(size_t(B * Hkv * T * Dh), rng);
  p.v = random_vec(size_t(B * Hkv * T * Dh), rng);
  p.dout = random_vec(size_t(B * H * T * Dh), rng);
  return p;
}

struct Result {
  std::vector<double> out, lse, dq, dk, dv;
};

// Naive reference in double: materialises each head's full T×T score matrix.
Result reference(const Problem& p) {
  const AttnShape& s = p.s;
  const int64_t T = s.T, Dh = s.Dh, G = s.H / s.Hkv;
  Result r;
  r.out.assign(p.q.size(), 0.0);
  r.dq.assign(p.q.size(), 0.0);
  r.dk.assign(p.k.size(), 0.0);
  r.dv.assign(p.v.size(), 0.0);
  r.lse.assign(size_t(s.B * s.H * T), 0.0);
  std::vector<double> P(size_t(T * T)), dS(size_t(T * T));
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.H; ++h) {
      const int64_t hk = h / G;
      for (int64_t t = 0; t < T; ++t) {  // scores, softmax, lse
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t u = 0; u < T; ++u) {
          double acc = 0;
          for (int64_t d = 0; d < Dh; ++d) acc += p.q[at(p.qs, b, h, t, d)] * p.k[at(p.kvs, b, hk, u, d)];
          P[t * T + u] = (s.causal && u > t) ? -std::numeric_limits<double>::infinity() : acc * s.scale;
          mx = std::max(mx, P[t * T + u]);
        }
        double sum = 0;
        for (int64_t u = 0; u < T; ++u) sum += std::exp(P[t * T + u] - mx);
        const double lse = mx + std::log(sum);
        r.lse[(b * s.H + h) * T + t] = lse;
        for (int64_t u = 0; u < T; ++u) P[t * T + u] = std::exp(P[t * T + u] - lse);
      }
      for (int64_t t = 0; t < T; ++t) {  // out, dP, dS
        for (int64_t d = 0; d < Dh; ++d) {
          double acc = 0;
          for (int64_t u = 0; u < T; ++u) acc += P[t * T + u] * p.v[at(p.kvs, b, hk, u, d)];
          r.out[at(p.qs, b, h, t, d)] = acc;
        }
        double D = 0;
        for (int64_t u = 0; u < T; ++u) {
          double dp = 0;
          for (int64_t d = 0; d < Dh; ++d) dp += p.dout[at(p.qs, b, h, t, d)] * p.v[at(p.kvs, b, hk, u, d)];
          dS[t * T + u] = dp;
          D += P[t * T + u] * dp;
        }
        for (int64_t u = 0; u < T; ++u) dS[t * T + u] = P[t * T + u] * (dS[t * T + u] - D);
      }
      for (int64_t t = 0; t < T; ++t) {  // dq, dk, dv
        for (int64_t u = 0; u < T; ++u) {
          for (int64_t d = 0; d < Dh; ++d) {
            r.dq[at(p.qs, b, h, t, d)] += s.scale * dS[t * T + u] * p.k[at(p.kvs, b, hk, u, d)];
            r.dk[at(p.kvs, b, hk, u, d)] += s.scale * dS[t * T + u] * p.q[at(p.qs, b, h, t, d)];
            r.dv[at(p.kvs, b, hk, u, d)] += P[t * T + u] * p.dout[at(p.qs, b, h, t, d)];
          }
        }
      }
    }
  }
  return r;
}

// Normwise relative error: max |got − ref| / max(max |ref|, 0.1) (per-element relative error is meaningless near
// zero; the 0.1 floor covers tensors that are exactly zero in exact arithmetic, e.g. dq and dk when T = 1).
template <typename T>
double rel_error(const std::vector<T>& got, const std::vector<double>& ref) {
  if (got.size() != ref.size()) return std::numeric_limits<double>::infinity();
  double err = 0, mag = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = std::abs(double(got[i]) - ref[i]);
    if (!(e == e)) return std::numeric_limits<double>::infinity();  // NaN: unwritten or broken
    err = std::max(err, e);
    mag = std::max(mag, std::abs(ref[i]));
  }
  if (std::getenv("UOE_ATTN_TEST_VERBOSE")) std::printf("  err %.3g (max |ref| %.3g)\n", err / std::max(mag, 0.1), mag);
  return err / std::max(mag, 0.1);
}

std::string describe(const Problem& p, Layout layout) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "B=%lld H=%lld Hkv=%lld T=%lld Dh=%lld %s %s", (long long)p.s.B, (long long)p.s.H,
                (long long)p.s.Hkv, (long long)p.s.T, (long long)p.s.Dh, p.s.causal ? "causal" : "full",
                layout == Layout::BHTD ? "[B,H,T,Dh]" : "[B,T,H,Dh]");
  return buf;
}

}  // namespace
}  // namespace uoe::cpu
