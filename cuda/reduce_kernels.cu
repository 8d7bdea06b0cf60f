// CUDA reductions. Sums run as row sums ([K, R], R contiguous: a warp or a block per row, long rows split into
// fixed segments summed in a second pass) or column sums ([R, K], K contiguous: a thread per column and chunk of
// at most 256 rows, chunks summed in further passes). Every output's reduction tree depends only on the shape: no
// atomics, so results are bitwise reproducible run to run.
#include "ops/kernels/reduce.h"

#include <algorithm>

#include "cuda/check.h"
#include "cuda/reduce_kernels.cuh"
#include "cuda/stream.h"
#include "cuda/strided_index.cuh"
#include "ops/kernels/copy.h"

namespace uoe::cuda {
namespace {

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
