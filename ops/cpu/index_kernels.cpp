// CPU indexing kernels. Writes are partitioned so that no two threads touch one output
// element and every sum runs in index order: results never depend on the thread count.
#include "ops/kernels/index.h"

#include <omp.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/cpu/simd.h"

namespace uoe::cpu {
namespace {

TensorOptions opts(const Tensor& t) { return TensorOptions{}.with_dtype(t.dtype()).with_device(t.device()); }

// Element offsets of the first element of every line along the last dim of a tensor with
// shape `lines_shape` (its last dim excluded) and strides `strides`.
std::vector<int64_t> line_offsets(const Shape& lines_shape, const Shape& strides) {
  const int64_t nd = int64_t(lines_shape.size());
  std::vector<int64_t> offs(size_t(shape_numel(lines_shape)), 0);
  for (int64_t l = 0; l < int64_t(offs.size()); ++l) {
    int64_t rem = l, off = 0;
    for (int64_t d = nd - 1; d >= 0; --d) {
      off += (rem % lines_shape[d]) * strides[d];
      rem /= lines_shape[d];
    }
    offs[size_t(l)] = off;
  }
  return offs;
}

template <typename T>
UOE_SIMD void add_into(T* dst, const T* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += src[i];
}

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

}  // namespace

Tensor index_select(const Tensor& x_in, int64_t dim, const Tensor& index) {
  const Tensor x = x_in.detach().contiguous();
  const int64_t m = index.numel();
  Shape out_shape = x.shape();
  out_shape[dim] = m;
  Tensor out = empty(out_shape, opts(x));
  const Around g(x.shape(), dim);
  const int64_t* idx = index.data_ptr<int64_t>();
  const size_t bytes = size_t(g.inner) * x.itemsize();
  const char* px = static_cast<const char*>(x.raw_data());
  char* po = static_cast<char*>(out.raw_data());
#pragma omp parallel for schedule(static) if (out.numel() >= 32768 && !omp_in_parallel())
  for (int64_t w = 0; w < g.outer * m; ++w) {
    const int64_t o = w / m, i = w % m;
    std::copy_n(px + size_t((o * g.n + idx[i]) * g.inner) * x.itemsize(), bytes, po + size_t(w * g.inner) * x.itemsize());
  }
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src_in) {
  Tensor out = x.detach().clone();
  const Tensor src = src_in.detach().contiguous();
  const Around g(out.shape(), dim);
  const int64_t m = index.numel();
  const int64_t* idx = index.data_ptr<int64_t>();
  dispatch_arith(out.dtype(), "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* po = out.data_ptr<T>();
    const T* ps = src.data_ptr<T>();
    // Threads split (outer, column block); each walks the indices in order.
    constexpr int64_t kCols = 256;
    const int64_t col_blocks = (g.inner + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (m * g.inner * g.outer >= 32768 && !omp_in_parallel())
    for (int64_t w = 0; w < g.outer * col_blocks; ++w) {
      const int64_t o = w / col_blocks, c0 = (w % col_blocks) * kCols, nc = std::min(kCols, g.inner - c0);
      for (int64_t i = 0; i < m; ++i)
        add_into(po + (o * g.n + idx[i]) * g.inner + c0, ps + (o * m + i) * g.inner + c0, nc);
    }
  });
  return out;
}

Tensor gather(const Tensor& x_in, int64_t dim, const Tensor& index_in) {
  const Tensor x = x_in.detach().transpose(dim, -1);
  const Tensor index = index_in.transpose(dim, -1).contiguous();
  Tensor out = empty(index.shape(), opts(x));
  const int64_t m = index.size(-1);
  const Shape lines(index.shape().begin(), index.shape().end() - 1);
  const std::vector<int64_t> xoff = line_offsets(lines, x.strides());
  const int64_t xs = x.stride(-1);
  const int64_t* idx = index.data_ptr<int64_t>();
  dispatch_all(x.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* po = out.data_ptr<T>();
#pragma omp parallel for schedule(static) if (out.numel() >= 32768 && !omp_in_parallel())
    for (int64_t l = 0; l < int64_t(xoff.size()); ++l)
      for (int64_t j = 0; j < m; ++j) po[l * m + j] = px[xoff[size_t(l)] + idx[l * m + j] * xs];
  });
  return out.transpose(dim, -1).contiguous();
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index_in, const Tensor& src_in) {
  Tensor out = x.detach().clone();
  const Tensor ot = out.transpose(dim, -1);
  const Tensor index = index_in.transpose(dim, -1).contiguous();
  const Tensor src = src_in.detach().transpose(dim, -1);
  const int64_t m = index.size(-1);
  const Shape lines(index.shape().begin(), index.shape().end() - 1);
  const std::vector<int64_t> ooff = line_offsets(lines, ot.strides());
  const std::vector<int64_t> soff = line_offsets(lines, src.strides());
  const int64_t os = ot.stride(-1), ss = src.stride(-1);
  const int64_t* idx = index.data_ptr<int64_t>();
  dispatch_arith(out.dtype(), "scatter_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* po = out.data_ptr<T>();
    const T* ps = src.data_ptr<T>();
    // Lines (all coordinates but dim) write disjoint output lines; each runs in index order.
#pragma omp parallel for schedule(static) if (index.numel() >= 32768 && !omp_in_parallel())
    for (int64_t l = 0; l < int64_t(ooff.size()); ++l)
      for (int64_t j = 0; j < m; ++j) po[ooff[size_t(l)] + idx[l * m + j] * os] += ps[soff[size_t(l)] + j * ss];
  });
  return out;
}

std::pair<Tensor, Tensor> topk(const Tensor& x_in, int64_t k, int64_t dim, bool largest) {
  const Tensor x = x_in.detach().transpose(dim, -1).contiguous();
  const int64_t n = x.size(-1), rows = n ? x.numel() / n : 0;
  Shape shape = x.shape();
  shape.back() = k;
  Tensor values = empty(shape, opts(x));
  Tensor indices = empty(shape, TensorOptions{}.with_dtype(DType::Int64).with_device(x.device()));
  int64_t* pi = indices.data_ptr<int64_t>();
  dispatch_arith(x.dtype(), "topk", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* px = x.data_ptr<T>();
    T* pv = values.data_ptr<T>();
    const bool descending = largest;  // clang 14 refuses `largest` (of topk) in the comparator inside the omp loop
#pragma omp parallel for schedule(static) if (rows * n >= 32768 && !omp_in_parallel())
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = px + r * n;
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), 0);
      // larger (smaller) first, NaN counted as the largest (as max and the CUDA kernel), ties by lower index: a
      // strict weak order even with NaN
      std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
        const bool na = row[a] != row[a], nb = row[b] != row[b];
        if (na != nb) return na == descending;
        if (!na && row[a] != row[b]) return descending ? row[a] > row[b] : row[a] < row[b];
        return a < b;
      });
      for (int64_t j = 0; j < k; ++j) {
        pv[r * k + j] = row[order[size_t(j)]];
        pi[r * k + j] = order[size_t(j)];
      }
    }
  });
  return {values.transpose(dim, -1).contiguous(), indices.transpose(dim, -1).contiguous()};
}

int64_t first_out_of_range(const Tensor& index, int64_t size) {
  const int64_t* p = index.data_ptr<int64_t>();
  for (int64_t i = 0; i < index.numel(); ++i)
    if (p[i] < 0 || p[i] >= size) return i;
  return -1;
}

}  // namespace uoe::cpu
