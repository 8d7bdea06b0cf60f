// The CUDA kernels' strided addressing (cuda/strided_index.cuh) on the CPU: plan_geometry's merged loop, read back
// through OffsetCalc::get with 32- and 64-bit indices, gives every operand's element offset at every position of
// the original shape, for random shapes, permuted and broadcast strides and size-1 dims. Every elementwise, copy
// and index kernel of the CUDA backend addresses its operands this way.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <numeric>
#include <random>
#include <string>

#include "cuda/strided_index.cuh"

namespace uoe::cuda {
namespace {

// Strides of a row-major tensor of `shape` whose dims are stored in the order `perm` (outermost first), with
// broadcast (stride 0) dims where `broadcast` is set.
Shape strides_of(const Shape& shape, const std::vector<size_t>& perm, const std::vector<bool>& broadcast) {
  Shape st(shape.size(), 0);
  int64_t step = 1;
  for (size_t i = perm.size(); i-- > 0;) {
    const size_t d = perm[i];
    st[d] = broadcast[d] ? 0 : step;
    if (!broadcast[d]) step *= shape[d];
  }
  return st;
}

template <class Index>
void check_offsets(const Shape& shape, const std::array<Shape, 3>& strides, const OffsetCalc<3>& calc,
                   const std::string& what) {
  int64_t n = 1;
  for (const int64_t s : shape) n *= s;
  for (int64_t i = 0; i < n; ++i) {
    std::array<int64_t, 3> want{};
    for (int64_t rest = i, d = int64_t(shape.size()) - 1; d >= 0; --d) {
      const int64_t pos = rest % shape[size_t(d)];
      rest /= shape[size_t(d)];
      for (size_t k = 0; k < 3; ++k) want[k] += pos * strides[k][size_t(d)];
    }
    int64_t got[3];
    calc.get(Index(i), got);
    for (size_t k = 0; k < 3; ++k) ASSERT_EQ(got[k], want[k]) << what << " index " << i << " operand " << k;
  }
}

TEST(CudaStridedIndexEmulated, PlannedOffsetsAreTheOriginalShapesOffsets) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 300; ++trial) {
    const size_t nd = 1 + rng() % 6;
    Shape shape(nd);
    for (int64_t& s : shape) s = rng() % 4 == 0 ? 1 : 2 + int64_t(rng() % 4);
    std::array<Shape, 3> strides;
    std::string what = "shape " + shape_str(shape) + ", strides";
    for (size_t k = 0; k < 3; ++k) {
      std::vector<size_t> perm(nd);
      std::iota(perm.begin(), perm.end(), 0);
      if (k > 0 && rng() % 2) std::shuffle(perm.begin(), perm.end(), rng);  // operand 0: the contiguous output
      std::vector<bool> broadcast(nd, false);
      for (size_t d = 0; d < nd && k > 0; ++d) broadcast[d] = rng() % 5 == 0;
      strides[k] = strides_of(shape, perm, broadcast);
      what += " " + shape_str(strides[k]);
    }
    const OffsetCalc<3> calc = plan_geometry<3>("test", shape, strides);
    ASSERT_LE(calc.ndim, int(nd)) << what;
    check_offsets<uint32_t>(shape, strides, calc, what);
    check_offsets<uint64_t>(shape, strides, calc, what);
  }
}

TEST(CudaStridedIndexEmulated, ContiguousOperandsMergeIntoOneFlatDim) {
  const Shape shape{3, 1, 4, 5};
  const Shape contiguous{20, 20, 5, 1}, scalar{0, 0, 0, 0};
  const OffsetCalc<3> calc = plan_geometry<3>("test", shape, {contiguous, contiguous, scalar});
  EXPECT_EQ(calc.ndim, 1);
  EXPECT_EQ(calc.sizes[0], 60);
  EXPECT_TRUE(calc.is_flat());
}

TEST(CudaStridedIndexEmulated, TooManyDimsNameTheOp) {
  const Shape shape(9, 2);
  Shape transposed(9);
  for (size_t d = 0; d < 9; ++d) transposed[d] = int64_t(1) << d;  // reversed order: nothing merges
  const Shape contiguous = strides_of(shape, {0, 1, 2, 3, 4, 5, 6, 7, 8}, std::vector<bool>(9, false));
  try {
    plan_geometry<3>("add", shape, {contiguous, transposed, contiguous});
    FAIL() << "expected an error";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("[add]"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace uoe::cuda
