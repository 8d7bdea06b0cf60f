// The attention problems of the emulated attention tests (tests/cuda_emu/test_attention_*_emulated.cpp): random
// inputs in the kernels' layouts, attention and its gradients in double, the error measure, and output buffers
// with a guard past their end.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>

#include "ops/kernels/attention.h"

namespace uoe::cuda_emu {

using kernels::AttnShape;
using kernels::AttnStrides;

// A storage type's value as a double, and a double rounded into it (bfloat16 to nearest even).
template <class S>
double to_double(S x) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return __bfloat162float(x);
  else return double(x);
}
template <class S>
S from_double(double x) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return __float2bfloat16_rn(float(x));
  else return S(x);
}

// A buffer of n elements followed by a guard; all of it starts as NaN bytes (0xff), so an element nothing wrote
// shows in the error, and a write past the end in guard_intact().
template <class S>
struct Guarded {
  static constexpr size_t kGuard = 64;
  std::vector<S> data;
  size_t n;
  explicit Guarded(size_t n) : data(n + kGuard), n(n) { std::memset(data.data(), 0xff, data.size() * sizeof(S)); }
  S* p() { return data.data(); }
  bool guard_intact() const {
    for (size_t i = n * sizeof(S); i < data.size() * sizeof(S); ++i)
      if (reinterpret_cast<const unsigned char*>(data.data())[i] != 0xff) return false;
    return true;
  }
};

// ||x - ref|| / ||ref|| over the first ref.size() elements.
template <class S>
double rel_err(const S* x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double v = to_double(x[i]);
    num += (v - ref[i]) * (v - ref[i]), den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

struct AttnCase {
  int64_t B, H, Hkv, T, Dh;
  bool causal;
  std::string name() const {
    return "B=" + std::to_string(B) + " H=" + std::to_string(H) + " Hkv=" + std::to_string(Hkv) +
           " T=" + std::to_string(T) + " Dh=" + std::to_string(Dh) + " causal=" + std::to_string(causal);
  }
};

// q, out, dout (and dq) in [B, T, H, Dh] storage, k, v (and dk, dv) in [B, Hkv, T, Dh], as attention sees them.
// Values are standard normal rounded to bfloat16, so every storage type holds them exactly.
struct AttnProblem {
  AttnCase c;
  AttnShape s;
  AttnStrides qs, ks;
  std::vector<double> q, k, v, dout;
  explicit AttnProblem(const AttnCase& c)
      : c(c), s{c.B, c.H, c.Hkv, c.T, c.Dh, 1.0 / std::sqrt(double(c.Dh)), c.causal},
        qs{c.T * c.H * c.Dh, c.Dh, c.H * c.Dh}, ks{c.Hkv * c.T * c.Dh, c.T * c.Dh, c.Dh} {
    std::mt19937 rng(uint32_t(c.T * 131 + c.Dh * 7 + c.H));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    auto fill = [&](std::vector<double>& x, int64_t heads) {
      x.resize(size_t(c.B * heads * c.T * c.Dh));
      for (double& e : x) e = __bfloat162float(__float2bfloat16_rn(dist(rng)));
    };
    fill(q, c.H), fill(k, c.Hkv), fill(v, c.Hkv), fill(dout, c.H);
  }
  int64_t at(AttnStrides st, int64_t b, int64_t h, int64_t t) const { return b * st.batch + h * st.head + t * st.time; }
  template <class S>
  static std::vector<S> as(const std::vector<double>& x) {
    std::vector<S> r(x.size());
    for (size_t i = 0; i < x.size(); ++i) r[i] = from_double<S>(x[i]);
    return r;
  }
  // D = rowsum(dout ⊙ out) [B, H, T] from a kernel's out, as the library's launchers compute it.
  template <class S, class C>
  std::vector<C> dsum(const S* out) const {
    std::vector<C> D(size_t(c.B * c.H * c.T));
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t i = 0; i < c.T; ++i) {
          C acc = 0;
          for (int64_t d = 0, o = at(qs, b, h, i); d < c.Dh; ++d) acc += C(dout[size_t(o + d)] * to_double(out[o + d]));
          D[size_t((b * c.H + h) * c.T + i)] = acc;
        }
    return D;
  }
};

// Attention and its gradients in double, in the problem's layouts; lse [B, H, T].
struct AttnReference {
  std::vector<double> out, lse, dq, dk, dv;
  explicit AttnReference(const AttnProblem& p) {
    const AttnCase& c = p.c;
    out.assign(p.q.size(), 0), dq.assign(p.q.size(), 0), lse.assign(size_t(c.B * c.H * c.T), 0);
    dk.assign(p.k.size(), 0), dv.assign(p.k.size(), 0);
    std::vector<double> prob(size_t(c.T)), dprob(size_t(c.T));
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t i = 0; i < c.T; ++i) {
          const int64_t hk = h / (c.H / c.Hkv), qi = p.at(p.qs, b, h, i), keys = c.causal ? i + 1 : c.T;
          double mx = -INFINITY, sum = 0, D = 0;
          for (int64_t j = 0; j < keys; ++j) {
            double dot = 0;
            for (int64_t d = 0, kj = p.at(p.ks, b, hk, j); d < c.Dh; ++d) dot += p.q[size_t(qi + d)] * p.k[size_t(kj + d)];
            prob[size_t(j)] = dot * p.s.scale;
            mx = std::max(mx, prob[size_t(j)]);
          }
          for (int64_t j = 0; j < keys; ++j) sum += std::exp(prob[size_t(j)] - mx);
          lse[size_t((b * c.H + h) * c.T + i)] = mx + std::log(sum);
          for (int64_t j = 0; j < keys; ++j) {
            const int64_t kj = p.at(p.ks, b, hk, j);
            prob[size_t(j)] = std::exp(prob[size_t(j)] - mx) / sum;
            double dp = 0;
            for (int64_t d = 0; d < c.Dh; ++d) {
              out[size_t(qi + d)] += prob[size_t(j)] * p.v[size_t(kj + d)];
              dp += p.dout[size_t(qi + d)] * p.v[size_t(kj + d)];
            }
            dprob[size_t(j)] = dp;
            D += prob[size_t(j)] * dp;
          }
          for (int64_t j = 0; j < keys; ++j) {  // ds = p (dp - D); dq = scale ds k, dk += scale ds q, dv += p dout
            const int64_t kj = p.at(p.ks, b, hk, j);
            const double ds = prob[size_t(j)] * (dprob[size_t(j)] - D);
            for (int64_t d = 0; d < c.Dh; ++d) {
              dq[size_t(qi + d)] += p.s.scale * ds * p.k[size_t(kj + d)];
              dk[size_t(kj + d)] += p.s.scale * ds * p.q[size_t(qi + d)];
              dv[size_t(kj + d)] += prob[size_t(j)] * p.dout[size_t(qi + d)];
            }
          }
        }
  }
};

}  // namespace uoe::cuda_emu
