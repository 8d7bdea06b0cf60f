// CUDA reductions. Sums run as row sums ([K, R], R contiguous: a warp or a block per row, long rows split into
// fixed segments summed in a second pass) or column sums ([R, K], K contiguous: a thread per column and chunk of
// at most 256 rows, chunks summed in further passes). Every output's reduction tree depends only on the shape: no
// atomics, so results are bitwise reproducible run to run.
#include "ops/kernels/reduce.h"

#include <algorithm>
#include <type_traits>

#include "cuda/check.h"
#include "cuda/stream.h"
#include "cuda/strided_index.cuh"
#include "ops/kernels/copy.h"

namespace uoe::cuda {
namespace {

template <typename T>
__device__ __forceinline__ T shfl_down(T v, int delta) {
  if constexpr (std::is_same_v<T, int64_t>) {
    return static_cast<int64_t>(__shfl_down_sync(0xffffffffu, static_cast<long long>(v), delta));
  } else {
    return __shfl_down_sync(0xffffffffu, v, delta);
  }
}

// Sum over the THREADS threads of a row group (THREADS = 32: one warp; 256: the whole block, `smem` holds 8
// values). Fixed tree; the result is valid in thread 0 of the group.
template <int THREADS, typename T>
__device__ __forceinline__ T group_sum(T v, T* smem) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) v += shfl_down(v, d);
  if constexpr (THREADS > 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) smem[warp] = v;
    __syncthreads();
    if (warp == 0) {
      v = lane < THREADS / 32 ? smem[lane] : T(0);
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) v += shfl_down(v, d);
    }
    __syncthreads();  // smem is reused by the next row
  }
  return v;
}

// out[w], w in [0, K * segs): the sum of segment c = w % segs (elements [c*seg, min(R, (c+1)*seg))) of row
// k = w / segs of x [K, R]. THREADS threads per output, 256 / THREADS outputs per block.
template <typename T, int THREADS>
__global__ void row_sum_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t K, int64_t R, int64_t seg,
                               int64_t segs) {
  constexpr int kPerBlock = kThreads / THREADS;
  __shared__ T smem[kThreads / 32];
  const int sub = threadIdx.x / THREADS, lane = threadIdx.x % THREADS;
  const int64_t outputs = K * segs;
  for (int64_t base = int64_t(blockIdx.x) * kPerBlock; base < outputs; base += int64_t(gridDim.x) * kPerBlock) {
    const int64_t w = base + sub;
    T acc = T(0);
    if (w < outputs) {
      const int64_t k = w / segs, c = w % segs;
      const int64_t begin = c * seg, end = begin + seg < R ? begin + seg : R;
      const T* row = x + k * R;
      for (int64_t i = begin + lane; i < end; i += THREADS) acc += row[i];
    }
    acc = group_sum<THREADS>(acc, smem);
    if (lane == 0 && w < outputs) out[w] = acc;
  }
}

// out[c*K + k] = sum of x[r*K + k] over rows r in chunk c ([c*rows, min(R, (c+1)*rows))), in order of r.
template <typename T>
__global__ void column_sum_kernel(const T* __restrict__ x, T* __restrict__ out, int64_t R, int64_t K, int64_t rows,
                                  int64_t chunks) {
  const int64_t total = K * chunks;
  for (int64_t w = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; w < total; w += int64_t(gridDim.x) * blockDim.x) {
    const int64_t c = w / K, k = w % K;
    const int64_t begin = c * rows, end = begin + rows < R ? begin + rows : R;
    T acc = T(0);
    for (int64_t r = begin; r < end; ++r) acc += x[r * K + k];
    out[w] = acc;
  }
}

constexpr int64_t kSegment = 8192;      // long rows are summed segment by segment
constexpr int64_t kSplitBelowRows = 1024;  // rows are split into segments only when there are fewer rows than this
constexpr int64_t kColumnThreads = int64_t(1) << 17;
constexpr int64_t kColumnRows = 256;  // the most rows one thread sums into a partial

template <typename T>
void launch_row_sums(const T* x, T* out, int64_t K, int64_t R, int64_t seg, int64_t segs, cudaStream_t stream) {
  const int64_t outputs = K * segs;
  if (seg <= 1024) {
    row_sum_kernel<T, 32><<<grid_for(outputs * 32), kThreads, 0, stream>>>(x, out, K, R, seg, segs);
  } else {
    row_sum_kernel<T, kThreads><<<grid_for(outputs * kThreads), kThreads, 0, stream>>>(x, out, K, R, seg, segs);
  }
  check_launch("sum");
}

// out[k] = sum_r x[k*R + r]
template <typename T>
void row_sums(const Tensor& like, const T* x, T* out, int64_t K, int64_t R, cudaStream_t stream) {
  if (R <= kSegment || K >= kSplitBelowRows) return launch_row_sums(x, out, K, R, R, int64_t(1), stream);
  const int64_t segs = (R + kSegment - 1) / kSegment;
  const Tensor partial = empty({K, segs}, TensorOptions{}.with_dtype(like.dtype()).with_device(like.device()));
  launch_row_sums(x, partial.data_ptr<T>(), K, R, kSegment, segs, stream);
  row_sums(like, static_cast<const T*>(partial.data_ptr<T>()), out, K, segs, stream);
}

// out[k] = sum_r x[r*K + k]: rows are split into chunks (enough for kColumnThreads threads, of at most kColumnRows
// rows), whose partial sums [chunks, K] are column-summed the same way.
template <typename T>
void column_sums(const Tensor& like, const T* x, T* out, int64_t R, int64_t K, cudaStream_t stream) {
  int64_t chunks = std::max(std::min((R + 31) / 32, std::max<int64_t>(1, kColumnThreads / K)),
                            (R + kColumnRows - 1) / kColumnRows);
  const int64_t rows = (R + chunks - 1) / chunks;
  chunks = (R + rows - 1) / rows;
  if (chunks == 1) {
    column_sum_kernel<T><<<grid_for(K), kThreads, 0, stream>>>(x, out, R, K, R, 1);
    check_launch("sum");
    return;
  }
  const Tensor partial = empty({chunks, K}, TensorOptions{}.with_dtype(like.dtype()).with_device(like.device()));
  column_sum_kernel<T><<<grid_for(K * chunks), kThreads, 0, stream>>>(x, partial.data_ptr<T>(), R, K, rows, chunks);
  check_launch("sum");
  column_sums(like, static_cast<const T*>(partial.data_ptr<T>()), out, chunks, K, stream);
}

// ---- min / max ---------------------------------------------------------------------------------------
template <typename T>
struct Cand {
  T v;
  int64_t i;  // -1: no candidate
};

template <typename T>
__device__ __forceinline__ bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<T>) return isnan(v);
  else return false;
}

// The better of two candidates: NaN beats numbers, then the larger (smaller) value, then the lower index. This
// is associative and commutative, and picks what the CPU's first-occurrence scan picks.
template <typename T>
__device__ __forceinline__ Cand<T> better(Cand<T> a, Cand<T> b, bool is_max) {
  if (a.i < 0) return b;
  if (b.i < 0) return a;
  const bool an = is_nan(a.v), bn = is_nan(b.v);
  if (an || bn) {
    if (an && bn) return a.i < b.i ? a : b;
    return an ? a : b;
  }
  if (a.v == b.v) return a.i < b.i ? a : b;
  return (is_max ? a.v > b.v : a.v < b.v) ? a : b;
}

template <typename T>
__device__ __forceinline__ Cand<T> shfl_down(Cand<T> c, int delta) {
  return {shfl_down(c.v, delta), shfl_down(c.i, delta)};
}

template <int THREADS, typename T>
__device__ __forceinline__ Cand<T> group_best(Cand<T> c, Cand<T>* smem, bool is_max) {
#pragma unroll
  for (int d = 16; d > 0; d >>= 1) c = better(c, shfl_down(c, d), is_max);
  if constexpr (THREADS > 32) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) smem[warp] = c;
    __syncthreads();
    if (warp == 0) {
      c = lane < THREADS / 32 ? smem[lane] : Cand<T>{T(0), -1};
#pragma unroll
      for (int d = 16; d > 0; d >>= 1) c = better(c, shfl_down(c, d), is_max);
    }
    __syncthreads();
  }
  return c;
}

// vals[r], idxs[r] = best of row r of x [rows, n]; THREADS threads per row.
template <typename T, int THREADS>
__global__ void minmax_kernel(const T* __restrict__ x, T* __restrict__ vals, int64_t* __restrict__ idxs, int64_t rows,
                              int64_t n, bool is_max) {
  constexpr int kPerBlock = kThreads / THREADS;
  __shared__ Cand<T> smem[kThreads / 32];
  const int sub = threadIdx.x / THREADS, lane = threadIdx.x % THREADS;
  for (int64_t base = int64_t(blockIdx.x) * kPerBlock; base < rows; base += int64_t(gridDim.x) * kPerBlock) {
    const int64_t r = base + sub;
    Cand<T> c{T(0), -1};
    if (r < rows) {
      const T* row = x + r * n;
      for (int64_t j = lane; j < n; j += THREADS) c = better(c, Cand<T>{row[j], j}, is_max);
    }
    c = group_best<THREADS>(c, smem, is_max);
    if (lane == 0 && r < rows) {
      vals[r] = c.v;
      idxs[r] = c.i;
    }
  }
}

}  // namespace

Tensor reduce_sum(const Tensor& x_in, const std::vector<bool>& reduce) {
  UOE_CHECK(x_in.is_cuda(), "[sum] CUDA kernel got a tensor on ", x_in.device().str());
  const Tensor x = x_in.detach();
  const ReductionSplit s = split_reduction(x.shape(), reduce);
  Tensor out = empty(s.out_shape, TensorOptions{}.with_dtype(x.dtype()).with_device(x.device()));
  if (s.K == 0) return out;
  if (s.R == 0) {
    fill(out, 0.0);
    return out;
  }
  const int device = x.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_arith(x.dtype(), "sum", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const Tensor cols = x.permute(s.cols_perm);
    if (!cols.is_contiguous() || s.K == 1) {
      const Tensor rows = x.permute(s.rows_perm).contiguous();
      row_sums(x, static_cast<const T*>(rows.data_ptr<T>()), out.data_ptr<T>(), s.K, s.R, stream);
    } else {
      column_sums(x, static_cast<const T*>(cols.data_ptr<T>()), out.data_ptr<T>(), s.R, s.K, stream);
    }
  });
  return out;
}

std::pair<Tensor, Tensor> reduce_minmax(const Tensor& x_in, int64_t dim, bool is_max) {
  UOE_CHECK(x_in.is_cuda(), "[", is_max ? "max" : "min", "] CUDA kernel got a tensor on ", x_in.device().str());
  const Tensor x = x_in.detach().permute(dim_moved_last(x_in.dim(), dim)).contiguous();  // rows in the result's order
  const int64_t n = x.size(-1);
  UOE_CHECK(n > 0, "[", is_max ? "max" : "min", "] cannot reduce an empty dim ", dim, " of shape ",
            shape_str(x_in.shape()));
  Shape out_shape = x_in.shape();
  out_shape.erase(out_shape.begin() + dim);
  const int64_t rows = x.numel() / n;
  Tensor values = empty(out_shape, TensorOptions{}.with_dtype(x.dtype()).with_device(x.device()));
  Tensor indices = empty(out_shape, TensorOptions{}.with_dtype(DType::Int64).with_device(x.device()));
  if (rows == 0) return {values, indices};
  const int device = x.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  dispatch_arith(x.dtype(), is_max ? "max" : "min", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    if (n <= 1024) {
      minmax_kernel<T, 32><<<grid_for(rows * 32), kThreads, 0, stream>>>(px, values.data_ptr<T>(),
                                                                         indices.data_ptr<int64_t>(), rows, n, is_max);
    } else {
      minmax_kernel<T, kThreads><<<grid_for(rows * kThreads), kThreads, 0, stream>>>(
          px, values.data_ptr<T>(), indices.data_ptr<int64_t>(), rows, n, is_max);
    }
    check_launch(is_max ? "max" : "min");
  });
  return {values, indices};
}

}  // namespace uoe::cuda
