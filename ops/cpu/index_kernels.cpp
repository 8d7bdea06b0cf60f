// CPU indexing kernels. Writes are partitioned so that no two threads touch one output
// element and every sum runs in index order: results never depend on the thread count. bfloat16 sums accumulate in
// float32 and are rounded once (bf16_compute.h).
#include "ops/kernels/index.h"

#include <omp.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "ops/cpu/bf16_compute.h"
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

template <typename C, typename T>
UOE_SIMD void add_into(C* dst, const T* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] += C(src[i]);
}

template <typename O, typename I>
UOE_SIMD void convert_into(O* dst, const I* src, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = O(src[i]);
}

// The positions of a 1-D index grouped by destination: destination r receives positions order[start[r]] ..
// order[start[r + 1] - 1], in increasing order (a stable counting sort).
struct Destinations {
  std::vector<int64_t> start, order;
  Destinations(const int64_t* idx, int64_t m, int64_t n) : start(size_t(n + 1), 0), order(size_t(m)) {
    for (int64_t i = 0; i < m; ++i) ++start[size_t(idx[i] + 1)];
    for (int64_t r = 0; r < n; ++r) start[size_t(r + 1)] += start[size_t(r)];
    std::vector<int64_t> next(start.begin(), start.end() - 1);
    for (int64_t i = 0; i < m; ++i) order[size_t(next[size_t(idx[i])]++)] = i;
  }
};

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
  const Destinations dest(index.data_ptr<int64_t>(), m, g.n);
  dispatch_arith_bf16(out.dtype(), "index_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    T* po = out.data_ptr<T>();
    const T* ps = src.data_ptr<T>();
    // Threads split (outer, destination row, column block); each destination sums its sources in index order, in
    // C, and is rounded once.
    constexpr int64_t kCols = 256;
    const int64_t col_blocks = (g.inner + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (m * g.inner * g.outer >= 32768 && !omp_in_parallel())
    for (int64_t w = 0; w < g.outer * g.n * col_blocks; ++w) {
      const int64_t o = w / (g.n * col_blocks), r = w / col_blocks % g.n, c0 = (w % col_blocks) * kCols;
      const int64_t first = dest.start[size_t(r)], last = dest.start[size_t(r + 1)], nc = std::min(kCols, g.inner - c0);
      if (first == last) continue;
      T* row = po + (o * g.n + r) * g.inner + c0;
      C acc[kCols];
      convert_into(acc, row, nc);
      for (int64_t k = first; k < last; ++k) add_into(acc, ps + (o * m + dest.order[size_t(k)]) * g.inner + c0, nc);
      convert_into(row, acc, nc);
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
  const int64_t line_length = ot.size(-1);
  dispatch_arith_bf16(out.dtype(), "scatter_add", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    T* po = out.data_ptr<T>();
    const T* ps = src.data_ptr<T>();
    // Lines (all coordinates but dim) write disjoint output lines; each sums in index order, in C (the destinations
    // it touches are loaded into a line of C first and rounded once at the end).
#pragma omp parallel if (index.numel() >= 32768 && !omp_in_parallel())
    {
      std::vector<C> sums(static_cast<size_t>(line_length));
#pragma omp for schedule(static)
      for (int64_t l = 0; l < int64_t(ooff.size()); ++l) {
        T* o = po + ooff[size_t(l)];
        const T* s = ps + soff[size_t(l)];
        const int64_t* at = idx + l * m;
        for (int64_t j = 0; j < m; ++j) sums[size_t(at[j])] = C(o[at[j] * os]);
        for (int64_t j = 0; j < m; ++j) sums[size_t(at[j])] += C(s[j * ss]);
        for (int64_t j = 0; j < m; ++j) o[at[j] * os] = T(sums[size_t(at[j])]);
      }
    }
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
