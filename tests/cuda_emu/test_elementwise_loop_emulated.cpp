// The CUDA elementwise loop's kernels (cuda/elementwise_loop_kernels.cuh), which every elementwise op of the CUDA
// backend runs, on the CPU through the stand-in runtime of tests/cuda_emu/include: the flat loop (4-wide vectors, a
// scalar tail, broadcast scalars, mixed operand types) and the strided loop (permuted and broadcast operands, 32-
// and 64-bit indices), against the same function applied element by element.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <string>
#include <vector>

#include "cuda/elementwise_loop_kernels.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

using cuda_emu::bf16_normal, cuda_emu::Guarded;

struct Fma {
  __device__ float operator()(float a, double b, float c) const { return a * float(b) + c; }
};
float fma_ref(float a, double b, float c) { return a * float(b) + c; }

template <int N>
ew::Ptrs<N> ptrs_of(std::array<void*, N> p) {
  ew::Ptrs<N> r;
  for (int k = 0; k < N; ++k) r.p[k] = static_cast<char*>(p[size_t(k)]);
  return r;
}

// n elements (a multiple of 4 plus a tail of 3): a contiguous float, a contiguous double and a broadcast float.
TEST(CudaElementwiseLoopEmulated, FlatLoopVectorsTailAndBroadcastScalar) {
  const int64_t n = 4 * 251 + 3;
  Guarded<float> a{size_t(n)}, c{1}, out{size_t(n)};
  Guarded<double> b{size_t(n)};
  const std::vector<double> x = bf16_normal(size_t(2 * n), 1);
  for (int64_t i = 0; i < n; ++i) a.p()[i] = float(x[size_t(i)]), b.p()[i] = x[size_t(n + i)];
  c.p()[0] = 0.5f;
  const OffsetCalc<4> calc = plan_geometry<4>("test", {n}, {Shape{1}, Shape{1}, Shape{1}, Shape{0}});
  ASSERT_TRUE(calc.is_flat());
  cuda_emu::launch(3, kThreads, [&] {
    ew::flat_kernel<ew::kVec, float, Fma, float, double, float>(Fma{}, ptrs_of<4>({out.p(), a.p(), b.p(), c.p()}), calc, n);
  });
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(out.p()[i], fma_ref(a.p()[i], b.p()[i], 0.5f)) << "element " << i;
  EXPECT_TRUE(out.guard_intact());
}

// out [3, 4, 5] contiguous; a stored transposed ([5, 4, 3] in memory); b broadcast along dim 1; c a scalar.
template <class Index>
void check_strided() {
  const Shape shape{3, 4, 5};
  const int64_t n = 60;
  Guarded<float> a{size_t(n)}, c{1}, out{size_t(n)};
  Guarded<double> b{15};
  const std::vector<double> x = bf16_normal(size_t(n + 15), 2);
  for (int64_t i = 0; i < n; ++i) a.p()[i] = float(x[size_t(i)]);
  for (int64_t i = 0; i < 15; ++i) b.p()[i] = x[size_t(n + i)];
  c.p()[0] = -1.25f;
  const std::array<Shape, 4> strides{Shape{20, 5, 1}, Shape{1, 3, 12}, Shape{5, 0, 1}, Shape{0, 0, 0}};
  const OffsetCalc<4> calc = plan_geometry<4>("test", shape, strides);
  cuda_emu::launch(1, 32, [&] {
    ew::strided_kernel<Index, float, Fma, float, double, float>(Fma{}, ptrs_of<4>({out.p(), a.p(), b.p(), c.p()}),
                                                                  calc, Index(n));
  });
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t k = 0; k < 5; ++k)
        ASSERT_EQ(out.p()[i * 20 + j * 5 + k], fma_ref(a.p()[i + 3 * j + 12 * k], b.p()[i * 5 + k], -1.25f))
            << "element " << i << ", " << j << ", " << k;
  EXPECT_TRUE(out.guard_intact());
}
TEST(CudaElementwiseLoopEmulated, StridedLoop32BitIndex) { check_strided<uint32_t>(); }
TEST(CudaElementwiseLoopEmulated, StridedLoop64BitIndex) { check_strided<uint64_t>(); }

}  // namespace
}  // namespace uoe::cuda
