// Device dispatch of the op layer: a kernel call goes to uoe::cpu or, for tensors on a GPU, to uoe::cuda. Each
// kernel family declares its list once for both backends (ops/kernels/*.h); a build without CUDA links stubs of
// the GPU side that raise (cuda/stub/), so the dispatch is the same in every build.
#pragma once
#include "core/device_scope.h"
#include "core/tensor.h"

// UOE_KERNEL(t, f(args)): cuda::f(args) when t is on a GPU, else cpu::f(args).
#define UOE_KERNEL(t, call) ((t).is_cuda() ? ::uoe::cuda::call : ::uoe::cpu::call)

namespace uoe::ops {

// While alive: the GPU of `t` is the current CUDA device (kernels and allocations of an op go there); nothing
// for CPU tensors.
struct OnDevice {
  DeviceScope scope;
  explicit OnDevice(const Tensor& t) : scope(t.device()) {}
};

}  // namespace uoe::ops
