// Elementwise loops over broadcast operands: coalesced N-d iteration, OpenMP chunks, SIMD inner loops.
#pragma once
#include <omp.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/tensor.h"
#include "ops/cpu/bf16_compute.h"
#include "ops/cpu/simd.h"

namespace uoe::cpu {

// Geometry of an elementwise op over N operands (operand 0 is the output): the output shape
// with adjacent dims merged where every operand allows it, and each operand's strides
// (0 along broadcast dims), all in elements.
template <size_t N>
struct LoopPlan {
  Shape shape;
  std::array<Shape, N> strides;
};

template <size_t N>
LoopPlan<N> plan_loop(const std::array<const Tensor*, N>& ops) {
  const Shape& out = ops[0]->shape();
  const size_t nd = out.size();
  LoopPlan<N> p;
  p.shape = out;
  for (size_t k = 0; k < N; ++k) {
    const Tensor& t = *ops[k];
    Shape st(nd, 0);
    const size_t off = nd - t.shape().size();
    for (size_t i = 0; i < t.shape().size(); ++i)
      st[off + i] = t.shape()[i] == 1 && out[off + i] != 1 ? 0 : t.strides()[i];
    p.strides[k] = st;
  }
  // Drop size-1 dims, then merge dim i into i+1 where every operand is contiguous across them.
  Shape shape;
  std::array<Shape, N> strides;
  for (size_t i = 0; i < nd; ++i) {
    if (p.shape[i] == 1) continue;
    bool merge = !shape.empty();
    for (size_t k = 0; k < N && merge; ++k) merge = strides[k].back() == p.strides[k][i] * p.shape[i];
    if (merge) {
      shape.back() *= p.shape[i];
      for (size_t k = 0; k < N; ++k) strides[k].back() = p.strides[k][i];
    } else {
      shape.push_back(p.shape[i]);
      for (size_t k = 0; k < N; ++k) strides[k].push_back(p.strides[k][i]);
    }
  }
  if (shape.empty()) {
    shape.push_back(1);
    for (size_t k = 0; k < N; ++k) strides[k].push_back(1);
  }
  return {shape, strides};
}

// Calls body(offsets, inner_n, inner_strides) for chunks of the iteration space, in
// parallel when large. offsets[k] is operand k's element offset of the chunk's first element.
template <size_t N, typename Body>
void for_each_chunk(const LoopPlan<N>& p, Body body) {
  const int64_t nd = int64_t(p.shape.size());
  const int64_t inner = p.shape.back();
  int64_t outer = 1;
  for (int64_t i = 0; i < nd - 1; ++i) outer *= p.shape[i];
  constexpr int64_t kChunk = 16384;
  const int64_t chunks_per_row = (inner + kChunk - 1) / kChunk;
  const int64_t work = outer * chunks_per_row;
  std::array<int64_t, N> inner_strides;
  for (size_t k = 0; k < N; ++k) inner_strides[k] = p.strides[k].back();
  const bool parallel = outer * inner >= 32768 && work > 1 && !omp_in_parallel();
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t w = 0; w < work; ++w) {
    const int64_t row = w / chunks_per_row;
    const int64_t begin = (w % chunks_per_row) * kChunk;
    const int64_t n = std::min(kChunk, inner - begin);
    std::array<int64_t, N> offs{};
    int64_t rem = row;
    for (int64_t d = nd - 2; d >= 0; --d) {
      const int64_t idx = rem % p.shape[d];
      rem /= p.shape[d];
      for (size_t k = 0; k < N; ++k) offs[k] += idx * p.strides[k][d];
    }
    for (size_t k = 0; k < N; ++k) offs[k] += begin * inner_strides[k];
    body(offs, n, inner_strides);
  }
}

// Elementwise loops run in blocks of kBlock elements staged through local arrays of the compute type (float for
// bfloat16, bf16_compute.h) where the direct loop would not vectorise: a strided operand is gathered into a block
// (so the math runs in the vector loop whatever the input layout), and bfloat16 elements given to a function of
// floats are widened into a block, the function runs on float blocks, and the results are rounded on the way out.
// GCC does not vectorise one loop that widens bfloat16, runs vec_math.h and rounds, but does each of the three.
constexpr int64_t kBlock = 256;

// Whether f, taking operands of types Args, is staged through float blocks: some operand is bfloat16 and f
// computes in float.
template <typename F, typename... Args>
constexpr bool kWidened = (std::is_same_v<Args, BFloat16> || ...) && std::is_invocable_v<F, compute_t<Args>...>;

// dst[0:n] = src[0], src[s], ..., src[(n-1)s] in type C.
template <typename C, typename T>
[[gnu::always_inline]] inline void load_block(C* dst, const T* src, int64_t s, int64_t n) {
  if (s == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = C(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i] = C(src[i * s]);
  }
}

// dst[0], dst[s], ..., dst[(n-1)s] = src[0:n], rounded to O. A contiguous bfloat16 destination is written as bits:
// GCC vectorises the rounding into uint16_t but not into the BFloat16 class (a scalar loop, measured 2x slower).
template <typename O, typename R>
[[gnu::always_inline]] inline void store_block(O* dst, int64_t s, const R* src, int64_t n) {
  if constexpr (std::is_same_v<O, BFloat16> && std::is_same_v<R, float>) {
    if (s == 1) {
      uint16_t* bits = reinterpret_cast<uint16_t*>(dst);
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) bits[i] = float_to_bf16_bits(src[i]);
      return;
    }
  }
  if (s == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) dst[i] = O(src[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) dst[i * s] = O(src[i]);
  }
}

template <typename O, typename A, typename F>
UOE_SIMD void unary_inner(O* o, int64_t so, const A* a, int64_t sa, int64_t n, F f) {
  constexpr bool widened = kWidened<F, A>;
  if (!widened && so == 1 && sa == 1) {
#pragma omp simd
    for (int64_t i = 0; i < n; ++i) o[i] = O(f(a[i]));
    return;
  }
  using CA = std::conditional_t<widened, compute_t<A>, A>;
  if (sa == 0) {  // one input value (a fill, a broadcast scalar): mapped once, stored n times
    const O v = O(f(CA(*a)));
    if (so == 1) {
      if constexpr (sizeof(O) == 2) {  // bfloat16/float16 as their bits: a fill of the struct stored one at a time
        uint16_t bits;                  // (zeros for slices' gradients: 0.8% of a tiny-uoe bf16 step)
        std::memcpy(&bits, &v, sizeof(bits));
        uint16_t* ob = reinterpret_cast<uint16_t*>(o);
#pragma omp simd
        for (int64_t i = 0; i < n; ++i) ob[i] = bits;
      } else {
        std::fill_n(o, n, v);
      }
    } else
      for (int64_t i = 0; i < n; ++i) o[i * so] = v;
    return;
  }
  using R = decltype(f(CA{}));
  alignas(64) CA in[kBlock];
  alignas(64) R out[kBlock];
  for (int64_t k = 0; k < n; k += kBlock) {
    const int64_t m = std::min(kBlock, n - k);
    load_block(in, a + k * sa, sa, m);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) out[i] = f(in[i]);
    store_block(o + k * so, so, out, m);
  }
}

template <typename O, typename A, typename B, typename F>
UOE_SIMD void binary_inner(O* o, int64_t so, const A* a, int64_t sa, const B* b, int64_t sb, int64_t n, F f) {
  constexpr bool widened = kWidened<F, A, B>;
  if constexpr (!widened) {
    if (so == 1 && sa == 1 && sb == 1) {
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = O(f(a[i], b[i]));
      return;
    }
    if (so == 1 && sa == 1 && sb == 0) {
      const B bv = *b;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = O(f(a[i], bv));
      return;
    }
    if (so == 1 && sa == 0 && sb == 1) {
      const A av = *a;
#pragma omp simd
      for (int64_t i = 0; i < n; ++i) o[i] = O(f(av, b[i]));
      return;
    }
  }
  using CA = std::conditional_t<widened, compute_t<A>, A>;
  using CB = std::conditional_t<widened, compute_t<B>, B>;
  using R = decltype(f(CA{}, CB{}));
  alignas(64) CA in_a[kBlock];
  alignas(64) CB in_b[kBlock];
  alignas(64) R out[kBlock];
  for (int64_t k = 0; k < n; k += kBlock) {
    const int64_t m = std::min(kBlock, n - k);
    load_block(in_a, a + k * sa, sa, m);
    load_block(in_b, b + k * sb, sb, m);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) out[i] = f(in_a[i], in_b[i]);
    store_block(o + k * so, so, out, m);
  }
}

template <typename O, typename A, typename B, typename C, typename F>
void ternary_inner(O* o, int64_t so, const A* a, int64_t sa, const B* b, int64_t sb, const C* c, int64_t sc,
                   int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i * so] = f(a[i * sa], b[i * sb], c[i * sc]);
}

// out[i] = O(f(a[i])) with a broadcast to out's shape. Element types must match the dtypes; f may take and return
// the compute type of a storage type (float for bfloat16, ops/cpu/bf16_compute.h): the store rounds once.
template <typename O, typename A, typename F>
void unary_loop(const Tensor& out, const Tensor& a, F f) {
  if (out.numel() == 0) return;
  auto plan = plan_loop<2>({&out, &a});
  O* po = static_cast<O*>(out.raw_data());
  const A* pa = static_cast<const A*>(a.raw_data());
  for_each_chunk(plan, [&](const std::array<int64_t, 2>& off, int64_t n, const std::array<int64_t, 2>& st) {
    unary_inner(po + off[0], st[0], pa + off[1], st[1], n, f);
  });
}

template <typename O, typename A, typename B, typename F>
void binary_loop(const Tensor& out, const Tensor& a, const Tensor& b, F f) {
  if (out.numel() == 0) return;
  auto plan = plan_loop<3>({&out, &a, &b});
  O* po = static_cast<O*>(out.raw_data());
  const A* pa = static_cast<const A*>(a.raw_data());
  const B* pb = static_cast<const B*>(b.raw_data());
  for_each_chunk(plan, [&](const std::array<int64_t, 3>& off, int64_t n, const std::array<int64_t, 3>& st) {
    binary_inner(po + off[0], st[0], pa + off[1], st[1], pb + off[2], st[2], n, f);
  });
}

template <typename O, typename A, typename B, typename C, typename F>
void ternary_loop(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& c, F f) {
  if (out.numel() == 0) return;
  auto plan = plan_loop<4>({&out, &a, &b, &c});
  O* po = static_cast<O*>(out.raw_data());
  const A* pa = static_cast<const A*>(a.raw_data());
  const B* pb = static_cast<const B*>(b.raw_data());
  const C* pc = static_cast<const C*>(c.raw_data());
  for_each_chunk(plan, [&](const std::array<int64_t, 4>& off, int64_t n, const std::array<int64_t, 4>& st) {
    ternary_inner(po + off[0], st[0], pa + off[1], st[1], pb + off[2], st[2], pc + off[3], st[3], n, f);
  });
}

}  // namespace uoe::cpu
