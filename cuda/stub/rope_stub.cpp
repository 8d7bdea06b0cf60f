// CPU-only build: the CUDA rope kernel (ops/kernels/rope.h) exists and raises, naming the op. Unreachable from the
// library (a CPU-only build allocates no GPU tensor), but callers dispatch to it without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/rope.h"

namespace uoe::cuda {

Tensor rope(const Tensor&, double, int64_t, bool) { no_cuda("rope"); }

}  // namespace uoe::cuda
