// What the elementwise, reduce and index ops hand their kernels for a reduced-float tensor. bfloat16 is a storage
// type of these CPU kernels (ops/cpu/bf16_compute.h: float32 registers, one rounding per result, the bits of the
// float32 route); the GPU's elementwise kernels take it too (native_bf16), its reductions and index sums do not.
// Float16 is computed in float32 copies everywhere.
#pragma once
#include "ops/op_utils.h"

namespace uoe::ops {

// A bfloat16 tensor on the CPU.
inline bool cpu_bf16(const Tensor& t) { return t.is_cpu() && t.dtype() == DType::BFloat16; }
// Whether an elementwise kernel (unary, binary, compare, activation gradients) takes t as it is: every dtype but
// float16, whose kernels compute in a float32 copy (compute_view).
inline bool elementwise_native(const Tensor& t) { return t.dtype() != DType::Float16; }
// What an elementwise kernel reads.
inline Tensor elementwise_view(const Tensor& t) { return elementwise_native(t) ? t : compute_view(t); }
// What a reduce or index-sum kernel reads: bfloat16 as it is on the CPU, else compute_view.
inline Tensor cpu_bf16_view(const Tensor& t) { return cpu_bf16(t) ? t : compute_view(t); }

}  // namespace uoe::ops
