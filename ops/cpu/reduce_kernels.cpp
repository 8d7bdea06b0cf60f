// CPU reductions. Sums run as row sums ([K, R] with R contiguous) or column sums ([R, K]), each split into
// fixed chunks set by the shape alone, so results never depend on the thread count. bfloat16 sums accumulate in
// float32 (the float32 route's additions, in its order) and are rounded once.
#include "ops/kernels/reduce.h"

#include <omp.h>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "ops/cpu/bf16_compute.h"
#include "ops/cpu/simd.h"

namespace uoe::cpu {
namespace {

constexpr int64_t kChunk = 8192;  // a row's sum is added chunk by chunk, in order

// T: the storage type; sums accumulate in C = compute_t<T> (float for bfloat16), rounded once into out.
template <typename T, typename C = compute_t<T>>
UOE_SIMD C sum_contiguous(const T* x, int64_t n) {
  C acc = C(0);
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += C(x[i]);
  return acc;
}

// out[k] = sum_r x[k*R + r]
template <typename T, typename C = compute_t<T>>
void row_sums(const T* x, T* out, int64_t K, int64_t R) {
  const int64_t chunks = (R + kChunk - 1) / kChunk;
  if (chunks <= 1) {
#pragma omp parallel for schedule(static) if (K * R >= 32768 && !omp_in_parallel())
    for (int64_t k = 0; k < K; ++k) out[k] = T(sum_contiguous(x + k * R, R));
    return;
  }
  std::vector<C> partial(size_t(K * chunks));
#pragma omp parallel for schedule(static) if (!omp_in_parallel())
  for (int64_t w = 0; w < K * chunks; ++w) {
    const int64_t k = w / chunks, c = w % chunks;
    const int64_t begin = c * kChunk;
    partial[size_t(w)] = sum_contiguous(x + k * R + begin, std::min(kChunk, R - begin));
  }
  for (int64_t k = 0; k < K; ++k) {
    C acc = C(0);
    for (int64_t c = 0; c < chunks; ++c) acc += partial[size_t(k * chunks + c)];
    out[k] = T(acc);
  }
}

template <typename C, typename T>
UOE_SIMD void add_row(C* acc, const T* x, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) acc[i] += C(x[i]);
}

constexpr int64_t kColumnChunk = 256;   // rows per partial column sum
constexpr int64_t kColumnBlock = 1024;  // columns per task: its accumulators stay in L1

// out[k] = sum_r x[r*K + k]. Each (chunk of kColumnChunk rows, block of columns) is summed into its own row of
// partials [chunks, K] (in C), which are then column-summed the same way: the order of additions depends on R and K
// only.
template <typename T, typename O, typename C = compute_t<T>>
void column_sums(const T* x, O* out, int64_t R, int64_t K) {
  const int64_t chunks = (R + kColumnChunk - 1) / kColumnChunk, blocks = (K + kColumnBlock - 1) / kColumnBlock;
  // from the caching allocator: a fresh mmap'ed buffer would page-fault on every call
  const Tensor partial = chunks > 1 ? empty({chunks, K}, TensorOptions{}.with_dtype(dtype_of<C>())) : Tensor();
  C* sums = chunks > 1 ? partial.data_ptr<C>() : nullptr;  // [chunks, K]
#pragma omp parallel for schedule(static) if (K * R >= 32768 && !omp_in_parallel())
  for (int64_t w = 0; w < chunks * blocks; ++w) {
    const int64_t c = w / blocks, k0 = (w % blocks) * kColumnBlock, n = std::min(kColumnBlock, K - k0);
    const int64_t r0 = c * kColumnChunk, r1 = std::min(R, r0 + kColumnChunk);
    alignas(64) C acc[kColumnBlock];  // local, so threads never write next to each other's partials
    std::fill(acc, acc + n, C(0));
    for (int64_t r = r0; r < r1; ++r) add_row(acc, x + r * K + k0, n);
    if (sums) std::copy(acc, acc + n, sums + c * K + k0);
    else std::transform(acc, acc + n, out + k0, [](C v) { return O(v); });
  }
  if (chunks > 1) column_sums(static_cast<const C*>(sums), out, chunks, K);
}

}  // namespace

Tensor reduce_sum(const Tensor& x_in, const std::vector<bool>& reduce) {
  const Tensor x = x_in.detach();
  const ReductionSplit s = split_reduction(x.shape(), reduce);
  Tensor out = empty(s.out_shape, TensorOptions{}.with_dtype(x.dtype()).with_device(x.device()));
  dispatch_arith_bf16(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (s.K * s.R == 0) {
      T* o = out.data_ptr<T>();
      for (int64_t k = 0; k < s.K; ++k) o[k] = T(0);
      return;
    }
    const Tensor cols = x.permute(s.cols_perm);
    if (!cols.is_contiguous() || s.K == 1) {
      const Tensor rows = x.permute(s.rows_perm).contiguous();
      row_sums(rows.data_ptr<T>(), out.data_ptr<T>(), s.K, s.R);
    } else {
      column_sums(cols.data_ptr<T>(), out.data_ptr<T>(), s.R, s.K);
    }
  });
  return out;
}

std::pair<Tensor, Tensor> reduce_minmax(const Tensor& x_in, int64_t dim, bool is_max) {
  const Tensor x = x_in.detach().permute(dim_moved_last(x_in.dim(), dim)).contiguous();  // rows in the result's order
  const int64_t n = x.size(-1);
  UOE_CHECK(n > 0, "[", is_max ? "max" : "min", "] cannot reduce an empty dim ", dim, " of shape ",
            shape_str(x_in.shape()));
  Shape out_shape = x_in.shape();
  out_shape.erase(out_shape.begin() + dim);
  const int64_t rows = x.numel() / n;
  Tensor values = empty(out_shape, TensorOptions{}.with_dtype(x.dtype()).with_device(x.device()));
  Tensor indices = empty(out_shape, TensorOptions{}.with_dtype(DType::Int64).with_device(x.device()));
  int64_t* pi = indices.data_ptr<int64_t>();
  dispatch_arith(x.dtype(), is_max ? "max" : "min", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* pv = values.data_ptr<T>();
#pragma omp parallel for schedule(static) if (rows * n >= 32768 && !omp_in_parallel())
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = px + r * n;
      T best = row[0];
      int64_t at = 0;
      for (int64_t j = 1; j < n; ++j) {
        const T v = row[j];
        bool better = is_max ? v > best : v < best;
        if constexpr (std::is_floating_point_v<T>) better = better || (std::isnan(v) && !std::isnan(best));
        if (better) {
          best = v;
          at = j;
        }
      }
      pv[r] = best;
      pi[r] = at;
    }
  });
  return {values, indices};
}

}  // namespace uoe::cpu
