// Elementwise CUDA loop: out[p] = f(in_0[p], ..., in_k[p]) over out's shape with the inputs broadcast to it.
// Contiguous operands (and broadcast scalars) take a grid-stride loop with 4-wide vector loads when aligned; any
// other geometry (or misaligned views) goes through OffsetCalc (strided_index.cuh). The kernels are in
// cuda/elementwise_loop_kernels.cuh; f is a functor with a __device__ operator().
#pragma once
#include <array>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/elementwise_loop_kernels.cuh"
#include "cuda/stream.h"
#include "cuda/strided_index.cuh"

namespace uoe::cuda {

// out = f(ins...) elementwise: Out and In... are the element types of out and of each input (they must match the
// dtypes); inputs broadcast to out's shape; out may alias an input exactly (same offset and strides).
template <typename Out, typename... In, typename F>
void elementwise(const char* op, F f, const Tensor& out, std::array<const Tensor*, sizeof...(In)> ins) {
  constexpr int N = sizeof...(In) + 1;
  const int64_t n = out.numel();
  if (n == 0) return;
  std::array<const Tensor*, N> all;
  all[0] = &out;
  for (int k = 1; k < N; ++k) all[k] = ins[size_t(k - 1)];
  const OffsetCalc<N> calc = plan_loop<N>(op, all);
  ew::Ptrs<N> ptrs;
  for (int k = 0; k < N; ++k) ptrs.p[k] = static_cast<char*>(all[k]->raw_data());
  const int device = out.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  bool flat = calc.is_flat() && calc.strides[0][0] == 1 && ew::vec_aligned<Out>(ptrs.p[0], 1);
  if (flat) {
    [[maybe_unused]] int k = 1;
    ((flat = flat && ew::vec_aligned<In>(ptrs.p[k], calc.strides[0][k]), ++k), ...);
  }
  if (flat) {  // contiguous (or broadcast scalar) operands, 16-byte aligned vectors
    ew::flat_kernel<ew::kVec, Out, F, In...><<<grid_for(n, ew::kVec), kThreads, 0, stream>>>(f, ptrs, calc, n);
  } else if (fits_u32(n)) {
    ew::strided_kernel<uint32_t, Out, F, In...><<<grid_for(n), kThreads, 0, stream>>>(f, ptrs, calc, uint32_t(n));
  } else {
    ew::strided_kernel<uint64_t, Out, F, In...><<<grid_for(n), kThreads, 0, stream>>>(f, ptrs, calc, uint64_t(n));
  }
  check_launch(op);
}

}  // namespace uoe::cuda
