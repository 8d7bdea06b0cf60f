// Tests of the CPU bfloat16 fused attention kernels (attention_forward_bf16 / attention_backward_bf16) on both paths
// (VDPBF16PS on AVX512-BF16, and the float kernels reading the bfloat16 tensors) against the float64 reference
// computed from the same bfloat16-rounded inputs, and the f32 path against the float kernels to the bit.
#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <cstring>
#include <iostream>
#include <limits>
#include <string>
#include <vector>

#include "ops/cpu/attention_reference.h"
#include "ops/cpu/gemm_isa.h"
#include "ops/kernels/attention.h"

namespace uoe::cpu {
namespace {

using detail::Bf16Isa;

// bfloat16's unit roundoff u = 2^-9 (8 significant bits). Each output is a float32 sum rounded once to bfloat16
// (u); its products read probabilities or dS rounded to bfloat16 (u each, relative to the sum of |terms|, which the
// normwise error bounds by a few times max |ref|). Hence 8u for out, dq, dk, dv. lse is float32 from exact
// products of the bfloat16 inputs: float32 accumulation.
constexpr double kU = 1.0 / 512;
constexpr double kTolOut = 8 * kU;
constexpr double kTolLse = 1e-5;

std::vector<BFloat16> to_bf16(const std::vector<double>& x) {
  std::vector<BFloat16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = BFloat16(float(x[i]));
  return y;
}
void round_to_bf16(std::vector<double>& x) {
  for (double& e : x) e = double(float(BFloat16(float(e))));
}

// A problem whose inputs are exactly representable in bfloat16 (the reference sees what the kernels see).
Problem bf16_problem(int64_t B, int64_t H, int64_t Hkv, int64_t T, int64_t Dh, bool causal, Layout layout,
                     unsigned seed) {
  Problem p = make_problem(B, H, Hkv, T, Dh, causal, layout, seed);
  for (std::vector<double>* x : {&p.q, &p.k, &p.v, &p.dout}) round_to_bf16(*x);
  return p;
}

struct Bf16Outputs {
  std::vector<BFloat16> out, dq, dk, dv;
  std::vector<float> lse;
};

// Outputs start as NaN so that an unwritten element fails the comparison.
Bf16Outputs run_bf16(const Problem& p) {
  const std::vector<BFloat16> q = to_bf16(p.q), k = to_bf16(p.k), v = to_bf16(p.v), dout = to_bf16(p.dout);
  const BFloat16 nan = BFloat16(std::numeric_limits<float>::quiet_NaN());
  Bf16Outputs r;
  r.out.assign(q.size(), nan);
  r.dq.assign(q.size(), nan);
  r.dk.assign(k.size(), nan);
  r.dv.assign(v.size(), nan);
  r.lse.assign(size_t(p.s.B * p.s.H * p.s.T), std::numeric_limits<float>::quiet_NaN());
  attention_forward_bf16(p.s, q.data(), p.qs, k.data(), p.kvs, v.data(), p.kvs, r.out.data(), p.qs, r.lse.data());
  attention_backward_bf16(p.s, q.data(), p.qs, k.data(), p.kvs, v.data(), p.kvs, r.out.data(), p.qs, r.lse.data(),
                          dout.data(), p.qs, r.dq.data(), p.qs, r.dk.data(), p.kvs, r.dv.data(), p.kvs);
  return r;
}

std::vector<double> widen(const std::vector<BFloat16>& x) {
  std::vector<double> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = double(float(x[i]));
  return y;
}

void expect_matches_bf16(const Bf16Outputs& got, const Result& ref) {
  EXPECT_LE(rel_error(widen(got.out), ref.out), kTolOut) << "out";
  EXPECT_LE(rel_error(got.lse, ref.lse), kTolLse) << "lse";
  EXPECT_LE(rel_error(widen(got.dq), ref.dq), kTolOut) << "dq";
  EXPECT_LE(rel_error(widen(got.dk), ref.dk), kTolOut) << "dk";
  EXPECT_LE(rel_error(widen(got.dv), ref.dv), kTolOut) << "dv";
}

// Each test runs on one path, pinned through the bfloat16 GEMM path (UOE_PIN_ISA's switch); the output names it.
class AttentionBf16 : public ::testing::TestWithParam<Bf16Isa> {
 protected:
  void SetUp() override {
    if (!detail::gemm_bf16_isa_supported(GetParam()))
      GTEST_SKIP() << "AVX512-BF16 not available on this CPU: the avx512_bf16 attention path was not run";
    ASSERT_TRUE(detail::gemm_bf16_force_isa(GetParam()));
    const std::string want = GetParam() == Bf16Isa::F32 ? "f32" : "avx512_bf16";
    ASSERT_EQ(std::string(attention_bf16_path()), want);
    std::cout << "[ bf16 attention path: " << attention_bf16_path() << " ]\n";
    RecordProperty("bf16_attention_path", attention_bf16_path());
  }
  void TearDown() override { detail::gemm_bf16_force_isa(Bf16Isa::Auto); }
};

// Sequence lengths and head dims that are odd, below, at and across the 64-wide tiles; causal and full; grouped
// query heads; both memory layouts.
TEST_P(AttentionBf16, MatchesReference) {
  unsigned seed = 500;
  for (int64_t T : {1, 15, 17, 33, 64, 130}) {
    for (int64_t Dh : {1, 15, 17, 33, 64}) {
      for (bool causal : {false, true}) {
        const Layout layout = seed % 2 ? Layout::BTHD : Layout::BHTD;
        const Problem p = bf16_problem(2, 4, 2, T, Dh, causal, layout, seed++);
        SCOPED_TRACE(describe(p, layout));
        expect_matches_bf16(run_bf16(p), reference(p));
      }
    }
  }
}

// Multi-head (Hkv = H) and multi-query (Hkv = 1) attention.
TEST_P(AttentionBf16, HeadGroups) {
  for (int64_t Hkv : {4, 1}) {
    const Problem p = bf16_problem(1, 4, Hkv, 100, 32, true, Layout::BTHD, 77 + unsigned(Hkv));
    SCOPED_TRACE(describe(p, Layout::BTHD));
    expect_matches_bf16(run_bf16(p), reference(p));
  }
}

template <typename X>
bool same_bits(const std::vector<X>& a, const std::vector<X>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(X)) == 0;
}

// Bit-identical results with 1, 2 and 3 threads.
TEST_P(AttentionBf16, ThreadCountIndependent) {
  const Problem p = bf16_problem(2, 4, 2, 200, 17, true, Layout::BHTD, 91);
  const int saved = omp_get_max_threads();
  std::vector<Bf16Outputs> runs;
  for (int n : {1, 2, 3}) {
    omp_set_num_threads(n);
    runs.push_back(run_bf16(p));
  }
  omp_set_num_threads(saved);
  for (size_t i = 1; i < runs.size(); ++i) {
    EXPECT_TRUE(same_bits(runs[0].out, runs[i].out)) << "out";
    EXPECT_TRUE(same_bits(runs[0].lse, runs[i].lse)) << "lse";
    EXPECT_TRUE(same_bits(runs[0].dq, runs[i].dq)) << "dq";
    EXPECT_TRUE(same_bits(runs[0].dk, runs[i].dk)) << "dk";
    EXPECT_TRUE(same_bits(runs[0].dv, runs[i].dv)) << "dv";
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, AttentionBf16, ::testing::Values(Bf16Isa::Avx512Bf16, Bf16Isa::F32),
                         [](const auto& info) { return std::string(detail::bf16_isa_name(info.param)); });

std::vector<float> to_float(const std::vector<BFloat16>& x) {
  std::vector<float> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = float(x[i]);
  return y;
}
std::vector<BFloat16> rounded(const std::vector<float>& x) {
  std::vector<BFloat16> y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = BFloat16(x[i]);
  return y;
}

// The f32 path reads the bfloat16 tensors in the float kernels' tiles: its results are the float kernels' on the
// widened tensors, each rounded once, to the bit (lse exactly), at every ISA level of the float kernels this CPU
// runs, for head dims that the kernels read in place (64) and pad (1, 17), causal and full, grouped heads, both
// layouts. The backward gets the forward's rounded out, as in training.
TEST(AttentionBf16Kernels, F32PathIsTheFloatKernelsOnWidenedTensorsRoundedOnce) {
  ASSERT_TRUE(detail::gemm_bf16_force_isa(Bf16Isa::F32));
  unsigned seed = 900;
  for (int level : {4, 3, 1}) {
    const int ran = attention_set_isa_level(level);
    if (ran != level) continue;  // above this CPU
    for (int64_t Dh : {1, 17, 64}) {
      for (bool causal : {false, true}) {
        const Layout layout = seed % 2 ? Layout::BTHD : Layout::BHTD;
        const Problem p = bf16_problem(2, 4, 2, 130, Dh, causal, layout, seed++);
        SCOPED_TRACE(describe(p, layout) + " isa level " + std::to_string(ran));
        const Bf16Outputs got = run_bf16(p);
        const std::vector<BFloat16> qb = to_bf16(p.q), kb = to_bf16(p.k), vb = to_bf16(p.v), dob = to_bf16(p.dout);
        const std::vector<float> q = to_float(qb), k = to_float(kb), v = to_float(vb), dout = to_float(dob);
        std::vector<float> out(q.size()), lse(got.lse.size()), dq(q.size()), dk(k.size()), dv(v.size());
        attention_forward<float>(p.s, q.data(), p.qs, k.data(), p.kvs, v.data(), p.kvs, out.data(), p.qs, lse.data());
        EXPECT_TRUE(same_bits(got.out, rounded(out))) << "out";
        EXPECT_TRUE(same_bits(got.lse, lse)) << "lse";
        const std::vector<float> out_rounded = to_float(got.out);
        attention_backward<float>(p.s, q.data(), p.qs, k.data(), p.kvs, v.data(), p.kvs, out_rounded.data(), p.qs,
                                  got.lse.data(), dout.data(), p.qs, dq.data(), p.qs, dk.data(), p.kvs, dv.data(),
                                  p.kvs);
        EXPECT_TRUE(same_bits(got.dq, rounded(dq))) << "dq";
        EXPECT_TRUE(same_bits(got.dk, rounded(dk))) << "dk";
        EXPECT_TRUE(same_bits(got.dv, rounded(dv))) << "dv";
      }
    }
  }
  attention_set_isa_level(0);
  detail::gemm_bf16_force_isa(Bf16Isa::Auto);
}

// Degenerate sizes on the bf16 entry points: nothing to compute, or an empty head dim (lse = log of the visible
// key count).
TEST(AttentionBf16Kernels, EmptyShapes) {
  const AttnStrides z{0, 0, 0};
  float lse[6] = {-1, -1, -1, -1, -1, -1};
  attention_forward_bf16(AttnShape{1, 2, 1, 0, 4, 0.5, true}, nullptr, z, nullptr, z, nullptr, z, nullptr, z, lse);
  EXPECT_EQ(lse[0], -1.0f);
  attention_forward_bf16(AttnShape{1, 2, 1, 3, 0, 0.5, true}, nullptr, z, nullptr, z, nullptr, z, nullptr, z, lse);
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(lse[i], std::log(float(i % 3 + 1))) << i;
  EXPECT_THROW(attention_forward_bf16(AttnShape{1, 3, 2, 3, 4, 0.5, true}, nullptr, z, nullptr, z, nullptr, z,
                                      nullptr, z, lse),
               std::exception);
}

}  // namespace
}  // namespace uoe::cpu
