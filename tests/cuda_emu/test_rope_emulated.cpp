// The CUDA RoPE kernels (cuda/rope_kernels.cuh) run unchanged on the CPU through the stand-in runtime of
// tests/cuda_emu/include: the cos/sin table against its formula in double, and the rotation of every row of a
// [B, T, H, Dh] tensor (float in 4-wide vectors and scalars, bfloat16 in 8-wide vectors over a float table), forward
// and inverse, with a position offset and grids smaller than the rows. The parity tests judge them on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cuda/rope_kernels.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

using cuda_emu::as, cuda_emu::bf16_normal, cuda_emu::Guarded, cuda_emu::rel_err;

// x stored as S, the table and the arithmetic in C = compute_t<S>; V elements per access; the launcher's block shape
// (threads over a half row's vectors, then rows).
template <class S, int V>
void check_rope(int64_t B, int64_t T, int64_t H, int64_t Dh, bool inverse, double tol) {
  using C = compute_t<S>;
  const int64_t h = Dh / 2, rows = B * T * H, offset = 3;
  const double base = 10000.0;
  const std::string what = "Dh=" + std::to_string(Dh) + " V=" + std::to_string(V) + " inverse=" + std::to_string(inverse);
  Guarded<C> cs{size_t(T * h)}, sn{size_t(T * h)};
  cuda_emu::launch(2, 64, [&] { rope_table_kernel<C>(T, h, Dh, base, offset, inverse, cs.p(), sn.p()); });
  std::vector<double> cs_ref(size_t(T * h)), sn_ref(size_t(T * h));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < h; ++i) {
      const double angle = double(t + offset) * std::pow(base, -2.0 * double(i) / double(Dh));
      cs_ref[size_t(t * h + i)] = std::cos(angle);
      sn_ref[size_t(t * h + i)] = inverse ? -std::sin(angle) : std::sin(angle);
    }
  EXPECT_LE(rel_err(cs.p(), cs_ref), sizeof(C) == 8 ? 1e-15 : 1e-7) << what;
  EXPECT_LE(rel_err(sn.p(), sn_ref), sizeof(C) == 8 ? 1e-15 : 1e-7) << what;

  const std::vector<double> x = bf16_normal(size_t(rows * Dh), uint32_t(Dh));
  const std::vector<S> xs = as<S>(x);
  Guarded<S> y{x.size()};
  const int64_t hv = h / V;
  const unsigned bx = hv <= 32 ? 32 : hv <= 64 ? 64 : 128, by = 256 / bx;
  cuda_emu::launch(2, dim3(bx, by), [&] { rope_kernel<S, V>(rows, T, H, h, xs.data(), cs.p(), sn.p(), y.p()); });
  std::vector<double> want(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t t = (r / H) % T;
    for (int64_t i = 0; i < h; ++i) {
      const double a = x[size_t(r * Dh + i)], b = x[size_t(r * Dh + h + i)];
      const double c = cs_ref[size_t(t * h + i)], s = sn_ref[size_t(t * h + i)];
      want[size_t(r * Dh + i)] = a * c - b * s;
      want[size_t(r * Dh + h + i)] = a * s + b * c;
    }
  }
  EXPECT_LE(rel_err(y.p(), want), tol) << what;
  EXPECT_TRUE(cs.guard_intact() && sn.guard_intact() && y.guard_intact()) << what;
}

TEST(CudaRopeEmulated, FloatFourAtATime) {
  for (const bool inverse : {false, true}) check_rope<float, 4>(2, 5, 3, 16, inverse, 1e-6);
}
TEST(CudaRopeEmulated, FloatScalarOddHalfRows) { check_rope<float, 1>(1, 7, 2, 130, false, 1e-6); }
TEST(CudaRopeEmulated, DoubleTwoAtATime) { check_rope<double, 2>(1, 4, 5, 64, true, 1e-14); }
TEST(CudaRopeEmulated, Bf16EightAtATimeOverAFloatTable) { check_rope<__nv_bfloat16, 8>(2, 6, 4, 128, false, 1e-2); }

}  // namespace
}  // namespace uoe::cuda
