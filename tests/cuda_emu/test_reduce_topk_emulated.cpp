// The CUDA reduction kernels (cuda/reduce_kernels.cuh) and top-k kernel (cuda/topk_kernel.cuh) run unchanged on the
// CPU through the stand-in runtime of tests/cuda_emu/include, against plain scans in double: row sums by a warp or a
// block per output over segments, column sums by chunks of rows, min / max with the index of the first best (NaN
// first, ties to the lower index), and top-k in output order (largest or smallest, NaN counted largest, ties by
// lower index), with grids smaller than the rows. The CPU-vs-CUDA parity tests (tests/cuda/) judge them on a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "cuda/reduce_kernels.cuh"
#include "cuda/topk_kernel.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

using cuda_emu::Guarded;

// Values to sum (sd 3, in quarters), or to rank (`rank`: small integers, so that even the extremes tie, and two NaN
// in row 1 of rows of n).
template <class T>
std::vector<T> values(size_t count, uint32_t seed, bool rank, int64_t n = 0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, rank ? 1.0 : 3.0);
  std::vector<T> v(count);
  for (T& x : v) x = T(rank ? std::round(dist(rng)) : std::round(dist(rng) * 4) / 4);
  if (rank) v[size_t(n + 7)] = v[size_t(n + n / 2)] = T(NAN);
  return v;
}

template <class T, int THREADS>
void check_row_sums(int64_t K, int64_t R, int64_t seg) {
  const int64_t segs = (R + seg - 1) / seg;
  const std::vector<T> x = values<T>(size_t(K * R), 1, false);
  Guarded<T> out{size_t(K * segs)};
  cuda_emu::launch(2, kThreads, [&] { row_sum_kernel<T, THREADS>(x.data(), out.p(), K, R, seg, segs); });
  for (int64_t k = 0; k < K; ++k)
    for (int64_t c = 0; c < segs; ++c) {
      double want = 0;
      for (int64_t r = c * seg; r < std::min(R, (c + 1) * seg); ++r) want += double(x[size_t(k * R + r)]);
      EXPECT_NEAR(double(out.p()[k * segs + c]), want, 1e-5 * (1 + std::abs(want)))
          << "THREADS=" << THREADS << " row " << k << " segment " << c;
    }
  EXPECT_TRUE(out.guard_intact());
}
TEST(CudaReduceEmulated, RowSumsAWarpPerOutput) { check_row_sums<float, 32>(11, 700, 700); }
TEST(CudaReduceEmulated, RowSumsABlockPerSegment) { check_row_sums<double, kThreads>(3, 5000, 2048); }

TEST(CudaReduceEmulated, ColumnSumsByChunksOfRows) {
  const int64_t R = 301, K = 37, rows = 64, chunks = (R + rows - 1) / rows;
  const std::vector<float> x = values<float>(size_t(R * K), 2, false);
  Guarded<float> out{size_t(chunks * K)};
  cuda_emu::launch(2, kThreads, [&] { column_sum_kernel<float>(x.data(), out.p(), R, K, rows, chunks); });
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t k = 0; k < K; ++k) {
      double want = 0;
      for (int64_t r = c * rows; r < std::min(R, (c + 1) * rows); ++r) want += x[size_t(r * K + k)];
      EXPECT_NEAR(out.p()[c * K + k], want, 1e-5 * (1 + std::abs(want))) << "chunk " << c << " column " << k;
    }
  EXPECT_TRUE(out.guard_intact());
}

// Whether a comes before b: NaN first, then larger (largest) or smaller, then the lower index.
template <class T>
bool ranks_before(T a, int64_t ia, T b, int64_t ib, bool largest) {
  if (std::isnan(double(a)) || std::isnan(double(b))) {
    if (std::isnan(double(a)) && std::isnan(double(b))) return ia < ib;
    return std::isnan(double(a)) == largest;
  }
  if (a != b) return largest ? a > b : a < b;
  return ia < ib;
}

template <class T, int THREADS>
void check_minmax(int64_t rows, int64_t n) {
  const std::vector<T> x = values<T>(size_t(rows * n), 3, true, n);
  for (const bool is_max : {false, true}) {
    Guarded<T> vals{size_t(rows)};
    Guarded<int64_t> idxs{size_t(rows)};
    cuda_emu::launch(2, kThreads, [&] { minmax_kernel<T, THREADS>(x.data(), vals.p(), idxs.p(), rows, n, is_max); });
    for (int64_t r = 0; r < rows; ++r) {
      int64_t best = 0;  // the first NaN, else the first extreme value (the CPU's min and max both keep NaN)
      for (int64_t j = 1; j < n; ++j) {
        const T a = x[size_t(r * n + j)], b = x[size_t(r * n + best)];
        if (std::isnan(double(b))) break;
        if (std::isnan(double(a)) || (is_max ? a > b : a < b)) best = j;
      }
      EXPECT_EQ(idxs.p()[r], best) << "THREADS=" << THREADS << " is_max=" << is_max << " row " << r;
    }
    EXPECT_TRUE(vals.guard_intact() && idxs.guard_intact());
  }
}
TEST(CudaReduceEmulated, MinMaxAWarpPerRow) { check_minmax<float, 32>(11, 300); }
TEST(CudaReduceEmulated, MinMaxABlockPerRow) { check_minmax<double, kThreads>(3, 2000); }

template <class T, int THREADS>
void check_topk(int64_t rows, int64_t n, int64_t k) {
  const std::vector<T> x = values<T>(size_t(rows * n), 4, true, n);
  for (const bool largest : {false, true}) {
    Guarded<T> vals{size_t(rows * k)};
    Guarded<int64_t> idxs{size_t(rows * k)};
    cuda_emu::launch(2, kThreads, [&] { topk_kernel<T, THREADS>(x.data(), vals.p(), idxs.p(), rows, n, k, largest); });
    for (int64_t r = 0; r < rows; ++r) {
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      const T* row = x.data() + r * n;
      std::sort(order.begin(), order.end(),
                [&](int64_t a, int64_t b) { return ranks_before(row[a], a, row[b], b, largest); });
      for (int64_t s = 0; s < k; ++s)
        EXPECT_EQ(idxs.p()[r * k + s], order[size_t(s)])
            << "THREADS=" << THREADS << " largest=" << largest << " row " << r << " pick " << s;
    }
    EXPECT_TRUE(vals.guard_intact() && idxs.guard_intact());
  }
}
TEST(CudaTopkEmulated, AWarpPerRow) { check_topk<float, 32>(10, 200, 5); }
TEST(CudaTopkEmulated, ABlockPerRow) { check_topk<double, kThreads>(3, 1500, 4); }

}  // namespace
}  // namespace uoe::cuda
