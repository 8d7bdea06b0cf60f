// CPU-only build: the CUDA elementwise kernels (ops/kernels/elementwise.h) exist and raise, naming the op.
// Unreachable from the library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/elementwise.h"

namespace uoe::cuda {

Tensor unary(UnaryKind, const Tensor&) { no_cuda("unary"); }
Tensor activation_grad(ActivationGrad, const Tensor&, const Tensor&) { no_cuda("activation_grad"); }
Tensor swiglu(const Tensor&, const Tensor&) { no_cuda("swiglu"); }
void swiglu_backward(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&) {
  no_cuda("swiglu_backward");
}
Tensor binary(BinaryKind, const Tensor&, const Tensor&) { no_cuda("binary"); }
void binary_into(BinaryKind, const Tensor&, const Tensor&, const Tensor&) { no_cuda("binary_into"); }
Tensor where(const Tensor&, const Tensor&, const Tensor&) { no_cuda("where"); }

}  // namespace uoe::cuda
