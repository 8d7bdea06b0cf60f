// N-d strided indexing for CUDA kernels: a host planner (broadcast, drop size-1 dims, merge contiguous dims, as
// ops/cpu/loops.h) and a device offset calculator (linear index -> per-operand element offsets, 64-bit offsets).
#pragma once
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <limits>

#include "core/error.h"
#include "core/tensor.h"

namespace uoe::cuda {

constexpr int kMaxDims = 8;  // dims left after merging; more raise an error naming the op

// Geometry of an N-operand loop over a shape (operand 0 usually the output). Dims are stored innermost first:
// sizes[0] is the fastest-varying dim. Strides are in elements (0 along broadcast dims).
template <int N>
struct OffsetCalc {
  int ndim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims][N] = {};

  // off[k] = element offset of operand k at linear index i (row-major over the shape). Index is uint32_t when the
  // loop has fewer than 2^31 elements (cheap division), else uint64_t.
  template <typename Index>
  __device__ __forceinline__ void get(Index i, int64_t (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
#pragma unroll
    for (int d = 0; d < kMaxDims; ++d) {
      if (d == ndim) break;
      const Index size = static_cast<Index>(sizes[d]);
      const Index q = i / size;
      const int64_t r = static_cast<int64_t>(i - q * size);
      i = q;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += r * strides[d][k];
    }
  }

  // A 1-d loop whose operands all have stride 0 or 1 (contiguous data and broadcast scalars).
  bool is_flat() const {
    if (ndim != 1) return false;
    for (int k = 0; k < N; ++k)
      if (strides[0][k] != 0 && strides[0][k] != 1) return false;
    return true;
  }
};

// Plans a loop over `shape` (outermost first) with per-operand strides (outermost first, already 0 along
// broadcast dims): size-1 dims dropped, neighbouring dims merged where every operand is contiguous across them.
template <int N>
OffsetCalc<N> plan_geometry(const char* op, const Shape& shape, const std::array<Shape, N>& strides) {
  Shape sizes;                   // outermost first
  std::array<Shape, N> st;       // outermost first
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == 1) continue;
    bool merge = !sizes.empty();
    for (int k = 0; k < N && merge; ++k) merge = st[k].back() == strides[k][i] * shape[i];
    if (merge) {
      sizes.back() *= shape[i];
      for (int k = 0; k < N; ++k) st[k].back() = strides[k][i];
    } else {
      sizes.push_back(shape[i]);
      for (int k = 0; k < N; ++k) st[k].push_back(strides[k][i]);
    }
  }
  if (sizes.empty()) {
    sizes.push_back(1);
    for (int k = 0; k < N; ++k) st[k].push_back(1);
  }
  UOE_CHECK(int(sizes.size()) <= kMaxDims, "[", op, "] CUDA kernels take at most ", kMaxDims,
            " non-mergeable dims, got shape ", shape_str(shape), " (make the operands contiguous first)");
  OffsetCalc<N> c;
  c.ndim = int(sizes.size());
  for (int d = 0; d < c.ndim; ++d) {
    const size_t src = sizes.size() - 1 - size_t(d);
    c.sizes[d] = sizes[src];
    for (int k = 0; k < N; ++k) c.strides[d][k] = st[k][src];
  }
  return c;
}

// The loop over ops[0]'s shape with every other operand broadcast to it (as cpu::plan_loop).
template <int N>
OffsetCalc<N> plan_loop(const char* op, const std::array<const Tensor*, N>& ops) {
  const Shape& out = ops[0]->shape();
  const size_t nd = out.size();
  std::array<Shape, N> strides;
  for (int k = 0; k < N; ++k) {
    const Tensor& t = *ops[k];
    UOE_CHECK(t.shape().size() <= nd, "[", op, "] operand ", k, " of shape ", shape_str(t.shape()),
              " has more dims than the result ", shape_str(out));
    Shape s(nd, 0);
    const size_t off = nd - t.shape().size();
    for (size_t i = 0; i < t.shape().size(); ++i) {
      UOE_CHECK(t.shape()[i] == out[off + i] || t.shape()[i] == 1, "[", op, "] operand ", k, " of shape ",
                shape_str(t.shape()), " does not broadcast to ", shape_str(out));
      s[off + i] = t.shape()[i] == 1 && out[off + i] != 1 ? 0 : t.strides()[i];
    }
    strides[k] = s;
  }
  return plan_geometry<N>(op, out, strides);
}

// Launch geometry of grid-stride loops: 256 threads, at most 65536 blocks.
constexpr int kThreads = 256;
inline unsigned grid_for(int64_t work, int64_t per_thread = 1) {
  const int64_t threads = (work + per_thread - 1) / per_thread;
  const int64_t blocks = (threads + kThreads - 1) / kThreads;
  return unsigned(blocks < 1 ? 1 : (blocks > 65536 ? 65536 : blocks));
}
// uint32_t indexing is used for loops of fewer than 2^31 elements.
inline bool fits_u32(int64_t n) { return n <= int64_t(std::numeric_limits<int32_t>::max()); }

}  // namespace uoe::cuda
