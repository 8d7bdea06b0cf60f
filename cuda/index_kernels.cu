// CUDA indexing kernels. Sums (index_add, scatter_add) are deterministic without atomics: the index positions are
// stably sorted by target (CUB radix sort, so equal targets keep the order of their positions), and one thread per
// target adds its sources in that order onto the copy of x, exactly as the CPU does (same values, same order).
#include "ops/kernels/index.h"

#include <cub/device/device_radix_sort.cuh>

#include <algorithm>
#include <limits>

#include "cuda/check.h"
#include "cuda/index_kernels.cuh"
#include "cuda/stream.h"
#include "cuda/strided_index.cuh"
#include "cuda/topk_kernel.cuh"

namespace uoe::cuda {
namespace {

TensorOptions opts(const Tensor& t) { return TensorOptions{}.with_dtype(t.dtype()).with_device(t.device()); }
TensorOptions int64_on(const Tensor& t) { return TensorOptions{}.with_dtype(DType::Int64).with_device(t.device()); }

// [outer, n, inner] geometry of a contiguous tensor around `dim`.
struct Around {
  int64_t outer = 1, n = 1, inner = 1;
  Around(const Shape& s, int64_t dim) {
    for (int64_t d = 0; d < int64_t(s.size()); ++d) {
      if (d < dim) outer *= s[d];
      else if (d == dim) n = s[d];
      else inner *= s[d];
    }
  }
};

template <typename F>
void dispatch_bits(size_t size, const char* op, F&& f) {
  switch (size) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default: fail("[", op, "] internal: element size ", size);
  }
}

struct Launch {
  int device;
  DeviceGuard guard;
  cudaStream_t stream;
  explicit Launch(const Tensor& t) : device(t.device().index), guard(device), stream(current_stream(device)) {}
};

struct SortedTargets {
  Tensor keys;  // int64 [M], ascending (values in [0, bound))
  Tensor pos;   // int64 [M]: the position each key came from; equal keys keep ascending positions
};

// Stable radix sort of keys (int64 [M], every value in [0, bound)) with their positions.
SortedTargets sort_targets(const char* op, const Tensor& keys, int64_t bound, cudaStream_t stream) {
  const int64_t M = keys.numel();
  const Tensor positions = empty({M}, int64_on(keys));
  iota_kernel<<<grid_for(M), kThreads, 0, stream>>>(positions.data_ptr<int64_t>(), M);
  check_launch(op);
  SortedTargets s{empty({M}, int64_on(keys)), empty({M}, int64_on(keys))};
  int end_bit = 1;
  while (end_bit < 63 && (int64_t(1) << end_bit) < bound) ++end_bit;
  // Keys are non-negative: sorted as uint64 over their low end_bit bits.
  const auto* kin = reinterpret_cast<const uint64_t*>(keys.data_ptr<int64_t>());
  auto* kout = reinterpret_cast<uint64_t*>(s.keys.data_ptr<int64_t>());
  const int64_t* vin = positions.data_ptr<int64_t>();
  int64_t* vout = s.pos.data_ptr<int64_t>();
  size_t temp_bytes = 0;
  UOE_CUDA_CHECK(op, cub::DeviceRadixSort::SortPairs(nullptr, temp_bytes, kin, kout, vin, vout, M, 0, end_bit, stream));
  const Tensor temp = empty({int64_t(std::max<size_t>(temp_bytes, 1))},
                            TensorOptions{}.with_dtype(DType::Bool).with_device(keys.device()));
  UOE_CUDA_CHECK(op, cub::DeviceRadixSort::SortPairs(temp.raw_data(), temp_bytes, kin, kout, vin, vout, M, 0, end_bit,
                                                     stream));
  return s;
}

// The lines geometry (index's shape without its last dim, in the transposed layout) with each operand's strides.
template <int N>
OffsetCalc<N> line_geometry(const char* op, const Shape& lines, const std::array<const Tensor*, N>& ops) {
  std::array<Shape, N> strides;
  for (int k = 0; k < N; ++k) {
    const Shape& st = ops[size_t(k)]->strides();
    strides[size_t(k)] = Shape(st.begin(), st.end() - 1);
  }
  return plan_geometry<N>(op, lines, strides);
}

}  // namespace

Tensor index_select(const Tensor& x_in, int64_t dim, const Tensor& index) {
  const Tensor x = x_in.detach().contiguous();
  const int64_t m = index.numel();
  Shape out_shape = x.shape();
  out_shape[size_t(dim)] = m;
  Tensor out = empty(out_shape, opts(x));
  const int64_t total = out.numel();
  if (total == 0) return out;
  const Around g(x.shape(), dim);
  Launch L(x);
  dispatch_bits(x.itemsize(), "index_select", [&](auto tag) {
    using U = typename decltype(tag)::type;
    index_select_kernel<U><<<grid_for(total), kThreads, 0, L.stream>>>(
        static_cast<const U*>(x.raw_data()), index.data_ptr<int64_t>(), static_cast<U*>(out.raw_data()), g.n, m,
        g.inner, total);
  });
  check_launch("index_select");
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src_in) {
  Tensor out = x.detach().clone();
  const int64_t m = index.numel();
  const Around g(out.shape(), dim);
  if (m == 0 || g.outer * g.inner == 0) return out;
  const Tensor src = src_in.detach().contiguous();
  Launch L(out);
  const SortedTargets sorted = sort_targets("index_add", index.contiguous(), g.n, L.stream);
  const int64_t total = g.outer * m * g.inner;
  dispatch_arith(out.dtype(), "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    index_add_kernel<T><<<grid_for(total), kThreads, 0, L.stream>>>(
        out.data_ptr<T>(), src.data_ptr<T>(), sorted.keys.data_ptr<int64_t>(), sorted.pos.data_ptr<int64_t>(), g.n, m,
        g.inner, total);
  });
  check_launch("index_add");
  return out;
}

Tensor gather(const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  const Tensor x = x_in.detach().transpose(dim, -1);
  const Tensor index = index_in.transpose(dim, -1);
  Tensor out = empty(index_in.shape(), opts(x_in));
  const Tensor ot = out.transpose(dim, -1);
  const int64_t total = out.numel();
  if (total == 0) return out;
  const int64_t m = index.size(-1);
  const Shape lines(index.shape().begin(), index.shape().end() - 1);
  const OffsetCalc<3> calc = line_geometry<3>("gather", lines, {&ot, &x, &index});
  Launch L(x);
  dispatch_bits(x.itemsize(), "gather", [&](auto tag) {
    using U = typename decltype(tag)::type;
    gather_kernel<U><<<grid_for(total), kThreads, 0, L.stream>>>(
        static_cast<U*>(out.raw_data()), static_cast<const U*>(x.raw_data()), index.data_ptr<int64_t>(), calc, m,
        ot.stride(-1), x.stride(-1), index.stride(-1), total);
  });
  check_launch("gather");
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  Tensor out = x.detach().clone();
  const int64_t total = index_in.numel();
  if (total == 0) return out;
  const Tensor ot = out.transpose(dim, -1);
  const Tensor index = index_in.transpose(dim, -1);
  const Tensor src = src_in.detach().transpose(dim, -1);
  const int64_t n = out.size(dim), m = index.size(-1);
  const Shape lines(index.shape().begin(), index.shape().end() - 1);
  const int64_t nlines = shape_numel(lines);
  Launch L(out);
  // Every index position's target element l*n + t, stably sorted.
  const Tensor keys = empty({total}, int64_on(out));
  const OffsetCalc<1> idx_lines = line_geometry<1>("scatter_add", lines, {&index});
  line_keys_kernel<<<grid_for(total), kThreads, 0, L.stream>>>(keys.data_ptr<int64_t>(), index.data_ptr<int64_t>(),
                                                              idx_lines, n, m, index.stride(-1), total);
  check_launch("scatter_add");
  const SortedTargets sorted = sort_targets("scatter_add", keys, nlines * n, L.stream);
  const OffsetCalc<2> calc = line_geometry<2>("scatter_add", lines, {&ot, &src});
  dispatch_arith(out.dtype(), "scatter_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    scatter_add_kernel<T><<<grid_for(total), kThreads, 0, L.stream>>>(
        out.data_ptr<T>(), src.data_ptr<T>(), sorted.keys.data_ptr<int64_t>(), sorted.pos.data_ptr<int64_t>(), calc, n,
        m, ot.stride(-1), src.stride(-1), total);
  });
  check_launch("scatter_add");
  return out;
}

std::pair<Tensor, Tensor> topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest) {
  const Tensor x = x_in.detach().transpose(dim, -1).contiguous();
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  Shape shape = x.shape();
  shape.back() = k;
  Tensor values = empty(shape, opts(x));
  Tensor indices = empty(shape, int64_on(x));
  if (rows > 0 && k > 0) {
    Launch L(x);
    dispatch_arith(x.dtype(), "topk", [&](auto tag) {
      using T = typename decltype(tag)::type;
      if (n <= 1024) {
        topk_kernel<T, 32><<<grid_for(rows * 32), kThreads, 0, L.stream>>>(
            x.data_ptr<T>(), values.data_ptr<T>(), indices.data_ptr<int64_t>(), rows, n, k, largest);
      } else {
        topk_kernel<T, kThreads><<<grid_for(rows * kThreads), kThreads, 0, L.stream>>>(
            x.data_ptr<T>(), values.data_ptr<T>(), indices.data_ptr<int64_t>(), rows, n, k, largest);
      }
    });
    check_launch("topk");
  }
  return {values.transpose(dim, -1).contiguous(), indices.transpose(dim, -1).contiguous()};
}

int64_t first_out_of_range(const Tensor& index, int64_t size) {
  UOE_CHECK(index.is_cuda() && index.dtype() == DType::Int64 && index.is_contiguous(),
            "[index] internal: range check needs a contiguous int64 CUDA tensor, got ", dtype_name(index.dtype()),
            " on ", index.device().str());
  const int64_t n = index.numel();
  if (n == 0) return -1;
  Launch L(index);
  const Tensor first = empty({1}, int64_on(index));
  auto* pfirst = reinterpret_cast<unsigned long long*>(first.data_ptr<int64_t>());
  UOE_CUDA_CHECK("index", cudaMemsetAsync(pfirst, 0xff, sizeof(unsigned long long), L.stream));
  out_of_range_kernel<<<grid_for(n), kThreads, 0, L.stream>>>(index.data_ptr<int64_t>(), n, size, pfirst);
  check_launch("index");
  unsigned long long host = 0;
  UOE_CUDA_CHECK("index", cudaMemcpyAsync(&host, pfirst, sizeof(host), cudaMemcpyDeviceToHost, L.stream));
  UOE_CUDA_CHECK("index", cudaStreamSynchronize(L.stream));
  return host == std::numeric_limits<unsigned long long>::max() ? -1 : int64_t(host);
}

}  // namespace uoe::cuda
