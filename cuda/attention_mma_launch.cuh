// The host side of the tensor-core bf16 attention (cuda/attention_mma_forward.cu, attention_mma_backward.cu): the
// kernel launch, the head-dim dispatch and the kernel arguments from a shape. Compiled by nvcc only.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/error.h"
#include "cuda/attention_mma_tiles.cuh"
#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/stream.h"

namespace uoe::cuda::detail {
namespace {

template <typename Kernel>
void launch(Kernel kernel, int64_t blocks, size_t smem, const LaunchContext& c, const char* op, const MmaArgs& a) {
  UOE_CHECK(blocks < (int64_t(1) << 31), "[", op, "] too many thread blocks (", blocks, ")");
  UOE_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<unsigned(blocks), kThreads, smem, c.stream>>>(a);
  check_launch(op);
}

// Calls f(IntC<DH>) for the head dim s.Dh (detail::mma_head_dim).
template <class F>
void with_head_dim(const AttnShape& s, const char* op, F&& f) {
  switch (s.Dh) {
    case 64: return f(std::integral_constant<int, 64>{});
    case 96: return f(std::integral_constant<int, 96>{});
    case 128: return f(std::integral_constant<int, 128>{});
    default: fail("[", op, "] tensor-core path needs head dim 64, 96 or 128, got ", s.Dh);
  }
}

MmaArgs make_args(const AttnShape& s, const char* op) {
  UOE_CHECK(s.T < (int64_t(1) << 30), "[", op, "] sequence length ", s.T, " is too long for the tensor-core kernels");
  return shape_args(s, attention_tiles_inner());
}

}  // namespace
}  // namespace uoe::cuda::detail
