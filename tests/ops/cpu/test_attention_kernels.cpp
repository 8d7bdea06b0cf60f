// Tests of the CPU fused attention kernels against a naive double-precision full-score-matrix reference.
#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "ops/kernels/attention.h"
#include "ops/cpu/attention_reference.h"

namespace uoe::cpu {
namespace {

template <typename T>
struct Outputs {
  std::vector<T> out, lse, dq, dk, dv;
};

template <typename T>
std::vector<T> cast(const std::vector<double>& x) {
  return std::vector<T>(x.begin(), x.end());
}

// Runs the kernels in precision T; outputs start as NaN so an unwritten element fails the comparison.
template <typename T>
Outputs<T> run_kernels(const Problem& p, bool backward = true) {
  const std::vector<T> q = cast<T>(p.q), k = cast<T>(p.k), v = cast<T>(p.v), dout = cast<T>(p.dout);
  const T nan = std::numeric_limits<T>::quiet_NaN();
  Outputs<T> r;
  r.out.assign(q.size(), nan);
  r.lse.assign(size_t(p.s.B * p.s.H * p.s.T), nan);
  attention_forward<T>(p.s, q.data(), p.qs, k.data(), p.kvs, v.data(), p.kvs, r.out.data(), p.qs, r.lse.data());
  if (!backward) return r;
  r.dq.assign(q.size(), nan);
  r.dk.assign(k.size(), nan);
  r.dv.assign(v.size(), nan);
  attention_backward<T>(p.s, q.data(), p.qs, k.data(), p.kvs, v.data(), p.kvs, r.out.data(), p.qs, r.lse.data(),
                        dout.data(), p.qs, r.dq.data(), p.qs, r.dk.data(), p.kvs, r.dv.data(), p.kvs);
  return r;
}

template <typename T>
void expect_matches(const Outputs<T>& got, const Result& ref, double tol, bool backward = true) {
  EXPECT_LE(rel_error(got.out, ref.out), tol) << "out";
  EXPECT_LE(rel_error(got.lse, ref.lse), tol) << "lse";
  if (!backward) return;
  EXPECT_LE(rel_error(got.dq, ref.dq), tol) << "dq";
  EXPECT_LE(rel_error(got.dk, ref.dk), tol) << "dk";
  EXPECT_LE(rel_error(got.dv, ref.dv), tol) << "dv";
}

constexpr double kTolDouble = 1e-12;
constexpr double kTolFloat = 1e-5;

// Both precisions against one reference, over causal × {MHA, GQA Hkv=2, MQA Hkv=1} × both layouts.
void check_grid(int64_t T, int64_t Dh, double scale_mult = 1.0) {
  unsigned seed = unsigned(1000 * T + Dh);
  for (bool causal : {false, true}) {
    for (int64_t Hkv : {4, 2, 1}) {
      for (Layout layout : {Layout::BHTD, Layout::BTHD}) {
        const Problem p = make_problem(2, 4, Hkv, T, Dh, causal, layout, seed++, scale_mult);
        SCOPED_TRACE(describe(p, layout));
        const Result ref = reference(p);
        expect_matches(run_kernels<double>(p), ref, kTolDouble);
        expect_matches(run_kernels<float>(p), ref, kTolFloat);
      }
    }
  }
}

class AttentionGrid : public ::testing::TestWithParam<std::tuple<int64_t, int64_t>> {};

TEST_P(AttentionGrid, MatchesReference) { check_grid(std::get<0>(GetParam()), std::get<1>(GetParam())); }

INSTANTIATE_TEST_SUITE_P(SeqAndHeadDim, AttentionGrid,
                         ::testing::Combine(::testing::Values<int64_t>(1, 5, 64, 100, 257),
                                            ::testing::Values<int64_t>(1, 8, 17, 64)),
                         [](const auto& info) {
                           char buf[64];
                           std::snprintf(buf, sizeof buf, "T%lld_Dh%lld", (long long)std::get<0>(info.param),
                                         (long long)std::get<1>(info.param));
                           return std::string(buf);
                         });

// Head dims whose padded width leaves partial register strips (24, 80) and the large 128.
TEST(AttentionKernels, OtherHeadDims) {
  check_grid(100, 24);
  check_grid(70, 80);
  check_grid(129, 128);
}

// Large scores (|s| up to ~30): the online softmax must rescale correctly across key blocks.
TEST(AttentionKernels, PeakySoftmax) { check_grid(257, 64, 4.0); }

// q in [B,T,H,Dh], k/v contiguous [B,Hkv,T,Dh], outputs in yet other layouts.
TEST(AttentionKernels, MixedLayouts) {
  const Problem p = make_problem(2, 4, 2, 100, 17, true, Layout::BTHD, 7);
  const Result ref = reference(p);  // in p's layouts
  const AttnStrides qs = p.qs, kvs_c = strides_for(Layout::BHTD, 2, 100, 17),
                    qs_c = strides_for(Layout::BHTD, 4, 100, 17);
  // Re-lay k, v into contiguous [B,Hkv,T,Dh]; write out/dq contiguous and dk/dv as [B,T,Hkv,Dh].
  std::vector<double> k(p.k.size()), v(p.v.size());
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t t = 0; t < 100; ++t)
        for (int64_t d = 0; d < 17; ++d) {
          k[at(kvs_c, b, h, t, d)] = p.k[at(p.kvs, b, h, t, d)];
          v[at(kvs_c, b, h, t, d)] = p.v[at(p.kvs, b, h, t, d)];
        }
  const size_t nq = p.q.size(), nk = p.k.size();
  std::vector<double> out(nq), lse(size_t(2 * 4 * 100)), dq(nq), dk(nk), dv(nk);
  attention_forward<double>(p.s, p.q.data(), qs, k.data(), kvs_c, v.data(), kvs_c, out.data(), qs_c, lse.data());
  attention_backward<double>(p.s, p.q.data(), qs, k.data(), kvs_c, v.data(), kvs_c, out.data(), qs_c, lse.data(),
                             p.dout.data(), qs, dq.data(), qs_c, dk.data(), p.kvs, dv.data(), p.kvs);
  double err = 0;
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t h = 0; h < 4; ++h)
      for (int64_t t = 0; t < 100; ++t)
        for (int64_t d = 0; d < 17; ++d) {
          err = std::max(err, std::abs(out[at(qs_c, b, h, t, d)] - ref.out[at(qs, b, h, t, d)]));
          err = std::max(err, std::abs(dq[at(qs_c, b, h, t, d)] - ref.dq[at(qs, b, h, t, d)]));
        }
  EXPECT_LE(err, 1e-12);
  EXPECT_LE(rel_error(lse, ref.lse), kTolDouble);
  EXPECT_LE(rel_error(dk, ref.dk), kTolDouble);
  EXPECT_LE(rel_error(dv, ref.dv), kTolDouble);
}

// q, k, v as views into one packed [B,T,3,H,Dh] buffer (strides with gaps), float and double.
TEST(AttentionKernels, PackedQkvViews) {
  const int64_t B = 2, H = 2, T = 70, Dh = 16;
  for (bool causal : {false, true}) {
    const Problem p = make_problem(B, H, H, T, Dh, causal, Layout::BHTD, 41);
    const Result ref = reference(p);
    const AttnStrides ps{T * 3 * H * Dh, Dh, 3 * H * Dh};  // element (b,h,t,d) of part i at i·H·Dh + ...
    std::vector<double> qkv(size_t(B * T * 3 * H * Dh));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t t = 0; t < T; ++t)
          for (int64_t d = 0; d < Dh; ++d) {
            qkv[at(ps, b, h, t, d)] = p.q[at(p.qs, b, h, t, d)];
            qkv[at(ps, b, h, t, d) + H * Dh] = p.k[at(p.kvs, b, h, t, d)];
            qkv[at(ps, b, h, t, d) + 2 * H * Dh] = p.v[at(p.kvs, b, h, t, d)];
          }
    auto check = [&](auto zero, double tol) {
      using F = decltype(zero);
      const std::vector<F> x = cast<F>(qkv), dout = cast<F>(p.dout);
      std::vector<F> out(p.q.size()), lse(size_t(B * H * T)), dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
      attention_forward<F>(p.s, x.data(), ps, x.data() + H * Dh, ps, x.data() + 2 * H * Dh, ps, out.data(), p.qs,
                            lse.data());
      attention_backward<F>(p.s, x.data(), ps, x.data() + H * Dh, ps, x.data() + 2 * H * Dh, ps, out.data(), p.qs,
                             lse.data(), dout.data(), p.qs, dq.data(), p.qs, dk.data(), p.kvs, dv.data(), p.kvs);
      const Outputs<F> got{out, lse, dq, dk, dv};
      expect_matches(got, ref, tol);
    };
    check(0.0, kTolDouble);
    check(0.0f, kTolFloat);
  }
}

// Degenerate sizes: nothing to compute (B = 0, T = 0) or an empty head dim (lse = log of the visible key count).
TEST(AttentionKernels, EmptyShapes) {
  const AttnStrides z{0, 0, 0};
  float lse[6] = {-1, -1, -1, -1, -1, -1};
  attention_forward<float>(AttnShape{0, 2, 1, 3, 4, 0.5, true}, nullptr, z, nullptr, z, nullptr, z, nullptr, z, lse);
  attention_forward<float>(AttnShape{1, 2, 1, 0, 4, 0.5, true}, nullptr, z, nullptr, z, nullptr, z, nullptr, z, lse);
  EXPECT_EQ(lse[0], -1.0f);
  attention_forward<float>(AttnShape{1, 2, 1, 3, 0, 0.5, true}, nullptr, z, nullptr, z, nullptr, z, nullptr, z, lse);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(lse[i], std::log(float(i % 3 + 1))) << i;
  attention_backward<float>(AttnShape{1, 2, 1, 3, 0, 0.5, true}, nullptr, z, nullptr, z, nullptr, z, nullptr, z, lse,
                            nullptr, z, nullptr, z, nullptr, z, nullptr, z);
  EXPECT_THROW(attention_forward<float>(AttnShape{1, 3, 2, 3, 4, 0.5, true}, nullptr, z, nullptr, z, nullptr, z,
                                        nullptr, z, lse),
               std::exception);
}

// Restores automatic ISA selection when a test that capped it ends.
struct IsaCap {
  int level;
  explicit IsaCap(int l) : level(attention_set_isa_level(l)) {}
  ~IsaCap() { attention_set_isa_level(0); }
};

// Every code path this CPU can run (AVX-512, AVX2, baseline) agrees with the reference.
TEST(AttentionKernels, EveryIsaLevel) {
  for (int want : {4, 3, 1}) {
    const IsaCap cap(want);
    if (cap.level != want) continue;  // CPU lacks this level
    SCOPED_TRACE(::testing::Message() << "isa level " << want);
    for (int64_t Dh : {17, 64}) {
      const Problem p = make_problem(2, 4, 2, 100, Dh, true, Layout::BTHD, 11 + unsigned(Dh));
      const Result ref = reference(p);
      expect_matches(run_kernels<double>(p), ref, kTolDouble);
      expect_matches(run_kernels<float>(p), ref, kTolFloat);
    }
  }
}

template <typename T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

template <typename T>
void expect_thread_independent(const Problem& p) {
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  const Outputs<T> one = run_kernels<T>(p);
  omp_set_num_threads(2);
  const Outputs<T> two = run_kernels<T>(p);
  omp_set_num_threads(3);
  const Outputs<T> three = run_kernels<T>(p);
  omp_set_num_threads(saved);
  for (const Outputs<T>* r : {&two, &three}) {
    EXPECT_TRUE(same_bits(one.out, r->out)) << "out";
    EXPECT_TRUE(same_bits(one.lse, r->lse)) << "lse";
    EXPECT_TRUE(same_bits(one.dq, r->dq)) << "dq";
    EXPECT_TRUE(same_bits(one.dk, r->dk)) << "dk";
    EXPECT_TRUE(same_bits(one.dv, r->dv)) << "dv";
  }
}

// Bit-identical results with 1, 2 and 3 threads.
TEST(AttentionKernels, ThreadCountIndependent) {
  for (bool causal : {false, true}) {
    const Problem p = make_problem(2, 4, 2, 257, 64, causal, Layout::BHTD, 21);
    SCOPED_TRACE(describe(p, Layout::BHTD));
    expect_thread_independent<float>(p);
    expect_thread_independent<double>(p);
  }
  const Problem p = make_problem(1, 4, 1, 100, 17, true, Layout::BTHD, 22);
  expect_thread_independent<float>(p);
}

// Central finite differences of loss = sum(out ⊙ W) against the backward (dout = W), in double.
void check_finite_differences(const Problem& p0, int max_per_tensor) {
  Problem p = p0;
  const double eps = 1e-5;
  auto loss = [&]() {
    const Outputs<double> r = run_kernels<double>(p, /*backward=*/false);
    double l = 0;
    for (size_t i = 0; i < r.out.size(); ++i) l += r.out[i] * p.dout[i];
    return l;
  };
  const Outputs<double> an = run_kernels<double>(p);
  struct Target {
    std::vector<double>* x;
    const std::vector<double>* g;
    const char* name;
  };
  for (const Target& tg : {Target{&p.q, &an.dq, "q"}, Target{&p.k, &an.dk, "k"}, Target{&p.v, &an.dv, "v"}}) {
    double gmax = 0;
    for (double g : *tg.g) gmax = std::max(gmax, std::abs(g));
    const size_t n = tg.x->size(), step = std::max<size_t>(1, n / size_t(max_per_tensor));
    for (size_t i = 0; i < n; i += step) {
      const double x0 = (*tg.x)[i];
      (*tg.x)[i] = x0 + eps;
      const double lp = loss();
      (*tg.x)[i] = x0 - eps;
      const double lm = loss();
      (*tg.x)[i] = x0;
      const double fd = (lp - lm) / (2 * eps);
      EXPECT_NEAR((*tg.g)[i], fd, 1e-7 * std::max(1.0, gmax)) << "d" << tg.name << "[" << i << "]";
    }
  }
}

TEST(AttentionKernels, FiniteDifferenceGradients) {
  // Every entry of a tiny grouped-query problem (dk, dv sum over the 2 q heads of the kv head).
  check_finite_differences(make_problem(1, 2, 1, 5, 3, false, Layout::BHTD, 31), 1000);
  check_finite_differences(make_problem(1, 2, 1, 5, 3, true, Layout::BTHD, 32), 1000);
  // Sampled entries of a causal problem spanning two key blocks.
  check_finite_differences(make_problem(1, 2, 1, 67, 5, true, Layout::BHTD, 33), 60);
}

}  // namespace
}  // namespace uoe::cpu
