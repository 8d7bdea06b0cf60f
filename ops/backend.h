// Device dispatch of the op layer: a kernel call goes to uoe::cpu or, for tensors on a GPU, to uoe::cuda, whose
// kernels mirror the CPU ones name for name and signature for signature (cuda/*_kernels.h beside
// ops/cpu/*_kernels.h). CPU-only builds never hold a CUDA tensor and compile the CPU branch alone.
#pragma once
#include <optional>

#include "core/tensor.h"
#if UOE_WITH_CUDA
#include "cuda/stream.h"
#endif

#if UOE_WITH_CUDA
// UOE_KERNEL(t, f(args)): cuda::f(args) when t is on a GPU, else cpu::f(args).
#define UOE_KERNEL(t, call) ((t).is_cuda() ? ::uoe::cuda::call : ::uoe::cpu::call)
#else
#define UOE_KERNEL(t, call) (::uoe::cpu::call)
#endif

namespace uoe::ops {

// While alive: the GPU of `t` is the current CUDA device (kernels and allocations of an op go there); nothing
// for CPU tensors.
#if UOE_WITH_CUDA
struct OnDevice {
  std::optional<cuda::DeviceGuard> guard;
  explicit OnDevice(const Tensor& t) {
    if (t.is_cuda()) guard.emplace(t.device().index);
  }
};
#else
struct OnDevice {
  explicit OnDevice(const Tensor&) {}
};
#endif

}  // namespace uoe::ops
