// CUDA elementwise kernels: unary math, fused activation derivatives, binary arithmetic and comparisons, where
// (mirror of ops/cpu/elementwise_kernels.h: same kinds, signatures and math, on device tensors).
#pragma once
#include "core/tensor.h"
#include "ops/cpu/elementwise_kernels.h"

namespace uoe::cuda {

using cpu::ActivationGrad;
using cpu::BinaryKind;
using cpu::UnaryKind;

// Unlike the CPU kernels, these also take bfloat16 operands (computed in float32, the result rounded once).
// x: float32/float64/bfloat16 (Neg, Abs, Sign, Relu also int), any strides -> new contiguous tensor.
Tensor unary(UnaryKind kind, const Tensor& x);
// g * f'(x) for the activation f; x and g broadcast together.
Tensor activation_grad(ActivationGrad kind, const Tensor& x, const Tensor& g);
// a (op) b with broadcasting; same dtype; comparisons give bool.
Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b);
// out = a (op) b for arithmetic kinds, written into an existing tensor (may alias a).
void binary_into(BinaryKind kind, const Tensor& out, const Tensor& a, const Tensor& b);
// cond ? a : b with broadcasting; cond is bool, a and b share a dtype.
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

}  // namespace uoe::cuda
