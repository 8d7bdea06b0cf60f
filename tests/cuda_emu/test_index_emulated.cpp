// The CUDA indexing kernels (cuda/index_kernels.cuh) run unchanged on the CPU through the stand-in runtime of
// tests/cuda_emu/include: index_select and gather against direct reads; index_add and scatter_add, fed keys sorted
// stably as the launcher's radix sort sorts them, bit for bit against the sums in ascending position order (the
// CPU's order); the range check's first bad position.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/index_kernels.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

using cuda_emu::bf16_normal, cuda_emu::Guarded;

std::vector<int64_t> random_indices(size_t count, int64_t bound, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int64_t> v(count);
  for (int64_t& x : v) x = int64_t(rng() % uint32_t(bound));
  return v;
}
// Keys sorted stably with their positions, as the launcher does it: positions from iota_kernel, then sorted as
// cub::DeviceRadixSort::SortPairs sorts them.
void sort_stably(const std::vector<int64_t>& keys, std::vector<int64_t>& sorted, std::vector<int64_t>& pos) {
  pos.assign(keys.size(), -1);
  cuda_emu::launch(1, 64, [&] { iota_kernel(pos.data(), int64_t(pos.size())); });
  for (size_t i = 0; i < pos.size(); ++i) EXPECT_EQ(pos[i], int64_t(i));
  std::stable_sort(pos.begin(), pos.end(), [&](int64_t a, int64_t b) { return keys[size_t(a)] < keys[size_t(b)]; });
  sorted.resize(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) sorted[i] = keys[size_t(pos[i])];
}

// x [outer, n, inner]; idx [m] with repeats; out [outer, m, inner] and the sums into [outer, n, inner].
TEST(CudaIndexEmulated, IndexSelectAndIndexAdd) {
  const int64_t outer = 3, n = 7, inner = 5, m = 20;
  const std::vector<double> x = bf16_normal(size_t(outer * n * inner), 1), src = bf16_normal(size_t(outer * m * inner), 2);
  const std::vector<int64_t> idx = random_indices(size_t(m), n, 3);
  Guarded<double> out{size_t(outer * m * inner)};
  cuda_emu::launch(2, 64, [&] { index_select_kernel<double>(x.data(), idx.data(), out.p(), n, m, inner, outer * m * inner); });
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t c = 0; c < inner; ++c)
        ASSERT_EQ(out.p()[(o * m + i) * inner + c], x[size_t((o * n + idx[size_t(i)]) * inner + c)]);

  std::vector<int64_t> keys, pos;
  sort_stably(idx, keys, pos);
  std::vector<float> acc(x.begin(), x.end()), want(x.begin(), x.end());
  const std::vector<float> srcf(src.begin(), src.end());
  cuda_emu::launch(2, 64, [&] {
    index_add_kernel<float>(acc.data(), srcf.data(), keys.data(), pos.data(), n, m, inner, outer * m * inner);
  });
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < m; ++i)  // ascending position order
      for (int64_t c = 0; c < inner; ++c)
        want[size_t((o * n + idx[size_t(i)]) * inner + c)] += srcf[size_t((o * m + i) * inner + c)];
  EXPECT_EQ(std::memcmp(acc.data(), want.data(), acc.size() * sizeof(float)), 0);
  EXPECT_TRUE(out.guard_intact());
}

// Lines [4, 3] (strides given per operand), gathered / scattered along a last dim of n = 6 (x, out of scatter) or
// m = 9 (idx, out of gather, src).
TEST(CudaIndexEmulated, GatherAndScatterAddAlongTheLastDim) {
  const Shape lines{4, 3};
  const int64_t L = 12, n = 6, m = 9;
  const std::vector<double> x = bf16_normal(size_t(L * n), 4), src = bf16_normal(size_t(L * m), 5);
  const std::vector<int64_t> idx = random_indices(size_t(L * m), n, 6);
  // every operand contiguous [4, 3, len]: line strides {3 len, len}
  const OffsetCalc<3> g = plan_geometry<3>("gather", lines, {Shape{3 * m, m}, Shape{3 * n, n}, Shape{3 * m, m}});
  Guarded<double> out{size_t(L * m)};
  cuda_emu::launch(2, 64, [&] { gather_kernel<double>(out.p(), x.data(), idx.data(), g, m, 1, 1, 1, L * m); });
  for (int64_t l = 0; l < L; ++l)
    for (int64_t j = 0; j < m; ++j) ASSERT_EQ(out.p()[l * m + j], x[size_t(l * n + idx[size_t(l * m + j)])]);

  Guarded<int64_t> keys_in{size_t(L * m)};
  const OffsetCalc<1> k = plan_geometry<1>("scatter_add", lines, {Shape{3 * m, m}});
  cuda_emu::launch(2, 64, [&] { line_keys_kernel(keys_in.p(), idx.data(), k, n, m, 1, L * m); });
  const std::vector<int64_t> line_keys(keys_in.p(), keys_in.p() + L * m);
  for (int64_t l = 0; l < L; ++l)
    for (int64_t j = 0; j < m; ++j) ASSERT_EQ(line_keys[size_t(l * m + j)], l * n + idx[size_t(l * m + j)]);
  std::vector<int64_t> keys, pos;
  sort_stably(line_keys, keys, pos);
  std::vector<float> acc(x.begin(), x.end()), want(x.begin(), x.end());
  const std::vector<float> srcf(src.begin(), src.end());
  const OffsetCalc<2> s = plan_geometry<2>("scatter_add", lines, {Shape{3 * n, n}, Shape{3 * m, m}});
  cuda_emu::launch(2, 64, [&] {
    scatter_add_kernel<float>(acc.data(), srcf.data(), keys.data(), pos.data(), s, n, m, 1, 1, L * m);
  });
  for (int64_t l = 0; l < L; ++l)
    for (int64_t j = 0; j < m; ++j) want[size_t(l * n + idx[size_t(l * m + j)])] += srcf[size_t(l * m + j)];
  EXPECT_EQ(std::memcmp(acc.data(), want.data(), acc.size() * sizeof(float)), 0);
  EXPECT_TRUE(out.guard_intact() && keys_in.guard_intact());
}

TEST(CudaIndexEmulated, RangeCheckKeepsTheFirstBadPosition) {
  std::vector<int64_t> idx = random_indices(3000, 10, 7);
  idx[2100] = 10, idx[1500] = -1, idx[2999] = 1 << 20;
  unsigned long long first = ~0ull;
  cuda_emu::launch(3, 256, [&] { out_of_range_kernel(idx.data(), int64_t(idx.size()), 10, &first); });
  EXPECT_EQ(first, 1500ull);
}

}  // namespace
}  // namespace uoe::cuda
