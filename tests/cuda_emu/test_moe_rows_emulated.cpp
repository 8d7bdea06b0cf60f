// The row kernels of the CUDA experts (cuda/moe_rows.cuh) run on the CPU through a stand-in CUDA runtime
// (tests/cuda_emu/include): their 16-byte bfloat16 paths give the bits of their scalar paths, and the scalar paths
// the plain formulas. A check that needs no GPU; the CPU-vs-CUDA parity tests (tests/cuda/) judge the kernels on one.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "cuda/moe_rows.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

using B = __nv_bfloat16;
using cuda_emu::launch;

std::vector<B> random_bf16(size_t n, uint32_t seed, float scale = 1.0f) {
  return cuda_emu::as<B>(cuda_emu::bf16_normal(n, seed, scale));
}

// n bfloat16 at a 16-byte boundary plus `offset` elements, filled with `init` (or 0xffff, a NaN).
struct Rows {
  std::vector<uint4> storage;
  B* p;
  explicit Rows(size_t n, size_t offset = 0) : storage((n + offset) / 8 + 2) {
    p = reinterpret_cast<B*>(storage.data()) + offset;
    std::memset(p, 0xff, n * sizeof(B));
  }
  Rows(const std::vector<B>& init, size_t offset = 0) : Rows(init.size(), offset) {
    std::memcpy(p, init.data(), init.size() * sizeof(B));
  }
};

int64_t differing(const B* a, const B* b, int64_t n) {
  int64_t bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += a[i].x != b[i].x;
  return bad;
}
float f(B b) { return __bfloat162float(b); }

// A plan: slot (t, k) goes to expert (t + k) mod n, and is empty where (t + k) mod 5 == 3; rows sorted by expert.
struct Plan {
  std::vector<int64_t> row, pair, row_expert;
  PlanView view() const { return {pair.data(), row.data(), row_expert.data()}; }
  int64_t rows() const { return int64_t(pair.size()); }
  Plan(int64_t T, int64_t K, int64_t n) : row(size_t(T * K), -1) {
    for (int64_t e = 0; e < n; ++e)
      for (int64_t t = 0; t < T; ++t)
        for (int64_t k = 0; k < K; ++k)
          if ((t + k) % n == e && (t + k) % 5 != 3) {
            row[size_t(t * K + k)] = rows();
            pair.push_back(t * K + k);
            row_expert.push_back(e);
          }
  }
};

struct Shape {
  int64_t T, K, n, d, R;
};
// Small shapes with rows of 8 bfloat16 multiples; blocks of 64 threads (two warps), fewer blocks than rows.
const std::array<Shape, 3> kShapes = {{{37, 3, 5, 24, 40}, {50, 2, 4, 64, 296}, {9, 8, 16, 8, 8}}};

std::string name(const Shape& s) {
  return "T=" + std::to_string(s.T) + " K=" + std::to_string(s.K) + " d=" + std::to_string(s.d) +
         " R=" + std::to_string(s.R);
}

TEST(CudaMoeRowsEmulated, GatherCopiesRowsIn16ByteUnits) {
  for (const Shape& s : kShapes) {
    const Plan plan(s.T, s.K, s.n);
    const int64_t P = plan.rows(), d = s.d;
    const std::vector<B> x = random_bf16(size_t(s.T * d), 1), dy = random_bf16(size_t(s.T * d), 2),
                         w = random_bf16(size_t(s.T * s.K), 3);
    const Rows bx(x), bdy(dy), bw(w);
    Rows xs[2] = {Rows(size_t(P * d)), Rows(size_t(P * d))}, dys[2] = {Rows(size_t(P * d)), Rows(size_t(P * d))},
         ws[2] = {Rows(size_t(P)), Rows(size_t(P))};
    ASSERT_TRUE(vec16_rows<B>(d, {bx.p, bdy.p, xs[1].p, dys[1].p})) << name(s);
    for (int vec : {0, 1})
      launch(7, 64, [&] {
        gather_rows_kernel<B>(P, s.K, 1, d, d, plan.view(), bx.p, xs[vec].p, nullptr, nullptr, bdy.p, dys[vec].p,
                              bw.p, ws[vec].p, vec == 1, false);
      });
    EXPECT_EQ(differing(xs[0].p, xs[1].p, P * d), 0) << name(s);
    EXPECT_EQ(differing(dys[0].p, dys[1].p, P * d), 0) << name(s);
    for (int64_t i = 0; i < P; ++i) {
      const int64_t t = plan.pair[size_t(i)] / s.K;
      EXPECT_EQ(differing(xs[0].p + i * d, bx.p + t * d, d), 0) << name(s) << " row " << i;
      EXPECT_EQ(ws[1].p[i].x, w[size_t(plan.pair[size_t(i)])].x) << name(s) << " row " << i;
    }
  }
}

TEST(CudaMoeRowsEmulated, SwigluForwardEightAtATimeIsTheScalarLoop) {
  for (const Shape& s : kShapes) {
    const int64_t count = Plan(s.T, s.K, s.n).rows() * s.R;
    const Rows hg(random_bf16(size_t(count), 4, 2.0f)), hp(random_bf16(size_t(count), 5));
    Rows a[2] = {Rows(size_t(count)), Rows(size_t(count))};
    ASSERT_TRUE(vec8_bf16<B>(count, {hg.p, hp.p, a[1].p})) << name(s);
    for (int vec : {0, 1}) launch(3, 64, [&] { swiglu_forward_kernel<B>(count, hg.p, hp.p, a[vec].p, vec == 1); });
    EXPECT_EQ(differing(a[0].p, a[1].p, count), 0) << name(s);
    for (int64_t e = 0; e < count; e += 97) {
      const double h = f(hg.p[e]);
      EXPECT_NEAR(f(a[0].p[e]), h / (1 + std::exp(-h)) * f(hp.p[e]), 1e-2 * (1 + std::abs(f(a[0].p[e]))));
    }
  }
}

TEST(CudaMoeRowsEmulated, SwigluBackwardEightAtATimeIsTheScalarLoop) {
  for (const Shape& s : kShapes) {
    const Plan plan(s.T, s.K, s.n);
    // the first 13 rows (an odd count: one warp has a row the other lacks): the emulated shuffles are slow
    const int64_t P = std::min<int64_t>(plan.rows(), 13), R = s.R;
    const std::vector<B> g = random_bf16(size_t(P * R), 6);
    const Rows hg(random_bf16(size_t(P * R), 7, 2.0f)), hp(random_bf16(size_t(P * R), 8)),
        ws(random_bf16(size_t(P), 9));
    Rows gw[2] = {Rows(g), Rows(g)}, dhg[2] = {Rows(size_t(P * R)), Rows(size_t(P * R))},
         dhp[2] = {Rows(size_t(P * R)), Rows(size_t(P * R))}, dw[2] = {Rows(size_t(s.T * s.K)), Rows(size_t(s.T * s.K))};
    ASSERT_TRUE(vec8_bf16<B>(R, {hg.p, hp.p, gw[1].p, dhg[1].p, dhp[1].p})) << name(s);
    for (int vec : {0, 1})
      launch(2, 64, [&] {
        swiglu_backward_kernel<B>(P, R, ws.p, hg.p, hp.p, gw[vec].p, dhg[vec].p, dhp[vec].p, plan.view(), dw[vec].p,
                                  vec == 1);
      });
    EXPECT_EQ(differing(gw[0].p, gw[1].p, P * R), 0) << name(s);
    EXPECT_EQ(differing(dhg[0].p, dhg[1].p, P * R), 0) << name(s);
    EXPECT_EQ(differing(dhp[0].p, dhp[1].p, P * R), 0) << name(s);
    for (int64_t e = 0; e < P * R; e += 37) {  // the formulas: w A, dH_g = w g p silu'(h), dH_p = w g silu(h)
      const double h = f(hg.p[e]), p = f(hp.p[e]), gj = f(g[size_t(e)]), w = f(ws.p[e / R]);
      const double sig = 1 / (1 + std::exp(-h)), silu = h * sig, silu_grad = sig + h * sig * (1 - sig);
      const double want[3] = {w * silu * p, w * gj * p * silu_grad, w * gj * silu};
      const float got[3] = {f(gw[0].p[e]), f(dhg[0].p[e]), f(dhp[0].p[e])};
      for (int k = 0; k < 3; ++k) EXPECT_NEAR(got[k], want[k], 1e-2 * (1 + std::abs(want[k]))) << name(s) << " " << k;
    }
    for (int64_t i = 0; i < P; ++i) {  // <A, g>: the lanes split the sum differently; both near the float64 sum
      double dot = 0;
      for (int64_t j = 0; j < R; ++j) {
        const double h = f(hg.p[i * R + j]);
        dot += h / (1 + std::exp(-h)) * f(hp.p[i * R + j]) * f(g[size_t(i * R + j)]);
      }
      const int64_t pr = plan.pair[size_t(i)];
      for (int vec : {0, 1})
        EXPECT_NEAR(f(dw[vec].p[pr]), dot, 2e-2 * (std::abs(dot) + 1e-2)) << name(s) << " row " << i << " vec " << vec;
    }
  }
}

TEST(CudaMoeRowsEmulated, CombineAndScatterBackEightColumnsAtATimeAreTheScalarLoops) {
  for (const Shape& s : kShapes) {
    const Plan plan(s.T, s.K, s.n);
    const int64_t P = plan.rows(), d = s.d, T = s.T, K = s.K;
    const Rows w(random_bf16(size_t(T * K), 10)), o(random_bf16(size_t(P * d), 11)), dxs(random_bf16(size_t(P * d), 12));
    Rows y[2] = {Rows(size_t(T * d)), Rows(size_t(T * d))}, dx[2] = {Rows(size_t(T * d)), Rows(size_t(T * d))},
         dw[2] = {Rows(size_t(T * K)), Rows(size_t(T * K))};
    ASSERT_TRUE(vec8_bf16<B>(d, {o.p, y[1].p, dxs.p, dx[1].p})) << name(s);
    for (int vec : {0, 1}) {
      launch(5, 64, [&] { combine_kernel<B>(T, K, d, plan.view(), w.p, o.p, y[vec].p, vec == 1); });
      launch(5, 64, [&] {
        scatter_back_kernel<B>(T, K, 1, d, d, plan.view(), dxs.p, dx[vec].p, nullptr, nullptr, dw[vec].p, vec == 1);
      });
    }
    EXPECT_EQ(differing(y[0].p, y[1].p, T * d), 0) << name(s);
    EXPECT_EQ(differing(dx[0].p, dx[1].p, T * d), 0) << name(s);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t c = 0; c < d; c += 5) {
        double want = 0, want_dx = 0;
        for (int64_t k = 0; k < K; ++k) {
          const int64_t r = plan.row[size_t(t * K + k)];
          if (r < 0) continue;
          want += double(f(w.p[t * K + k])) * f(o.p[r * d + c]);
          want_dx += f(dxs.p[r * d + c]);
        }
        EXPECT_NEAR(f(y[0].p[t * d + c]), want, 1e-2 * (1 + std::abs(want))) << name(s);
        EXPECT_NEAR(f(dx[0].p[t * d + c]), want_dx, 1e-2 * (1 + std::abs(want_dx))) << name(s);
      }
    for (int64_t i = 0; i < T * K; ++i) {
      if (plan.row[size_t(i)] < 0) {
        EXPECT_EQ(f(dw[1].p[i]), 0.0f) << name(s) << " empty slot " << i;
      }
    }
  }
}

TEST(CudaMoeRowsEmulated, The16BytePathsNeedAlignedWholeUnits) {
  Rows aligned(64), shifted(64, 1);
  EXPECT_TRUE(vec16_rows<B>(16, {aligned.p, nullptr}));
  EXPECT_FALSE(vec16_rows<B>(16, {aligned.p, shifted.p}));  // one misaligned pointer
  EXPECT_FALSE(vec16_rows<B>(12, {aligned.p}));             // rows of 24 bytes
  EXPECT_TRUE(vec16_rows<float>(4, {aligned.p}));           // the copies: any type in 16-byte rows
  EXPECT_TRUE(vec8_bf16<B>(8, {aligned.p}));
  EXPECT_FALSE(vec8_bf16<float>(8, {aligned.p}));  // the arithmetic paths: bfloat16 storage only
}

}  // namespace
}  // namespace uoe::cuda
