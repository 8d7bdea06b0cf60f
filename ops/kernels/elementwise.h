// The elementwise kernel family, one declaration list for both backends: unary math, fused activation derivatives,
// SwiGLU's gating and its derivatives, binary arithmetic and comparisons with broadcasting, where. Implemented in
// ops/cpu/elementwise_kernels.cpp and cuda/elementwise_kernels.cu (asynchronous on the device's current stream); a
// build without CUDA links stubs that raise (cuda/stub/). Callers pick the backend with UOE_KERNEL (ops/backend.h).
// The math is the same formula for formula (ops/cpu/vec_math.h; CUDA's libm in place of the CPU's float
// polynomials). Operands are float32/float64, or bfloat16 on either backend (loaded into float32, computed there,
// the result rounded once).
#pragma once
#include "core/tensor.h"

namespace uoe::kernels {

enum class UnaryKind { Neg, Exp, Log, Sqrt, Rsqrt, Abs, Sign, Tanh, Sigmoid, Relu, Gelu, GeluTanh, Silu, Softplus };
enum class ActivationGrad { Gelu, GeluTanh, Silu };
enum class BinaryKind { Add, Sub, Mul, Div, Pow, Eq, Ne, Lt, Le, Gt, Ge };

}  // namespace uoe::kernels

#define UOE_ELEMENTWISE_KERNELS                                                                                   \
  using kernels::ActivationGrad;                                                                                  \
  using kernels::BinaryKind;                                                                                      \
  using kernels::UnaryKind;                                                                                       \
  /* x: any strides (Neg, Abs, Sign, Relu also int) -> new contiguous tensor. */                                  \
  Tensor unary(UnaryKind kind, const Tensor& x);                                                                  \
  /* g * f'(x) for the activation f; x and g broadcast together. */                                               \
  Tensor activation_grad(ActivationGrad kind, const Tensor& x, const Tensor& g);                                  \
  /* SwiGLU's gating, h = silu(g) * p; g, p: any strides, one shape -> new contiguous tensor. */                 \
  Tensor swiglu(const Tensor& g, const Tensor& p);                                                                \
  /* Its derivatives in one pass: dg = (dh * p) * silu'(g), dp = dh * silu(g); g, p, dh contiguous, one shape,   \
     into dg, dp (contiguous, that shape). */                                                                     \
  void swiglu_backward(const Tensor& g, const Tensor& p, const Tensor& dh, const Tensor& dg, const Tensor& dp);   \
  /* a (op) b with broadcasting; same dtype; comparisons give bool. */                                            \
  Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b);                                               \
  /* out = a (op) b for arithmetic kinds, written into an existing tensor (may alias a). */                       \
  void binary_into(BinaryKind kind, const Tensor& out, const Tensor& a, const Tensor& b);                         \
  /* cond ? a : b with broadcasting; cond is bool, a and b share a dtype. */                                      \
  Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

namespace uoe::cpu {
UOE_ELEMENTWISE_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_ELEMENTWISE_KERNELS
}  // namespace uoe::cuda

#undef UOE_ELEMENTWISE_KERNELS
