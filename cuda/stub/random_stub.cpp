// CPU-only build: the CUDA random kernels (ops/kernels/random.h) exist and raise, naming the op. Unreachable from
// the library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/random.h"

namespace uoe::cuda {

void fill_uniform(const Tensor&, uint64_t, uint64_t, double, double) { no_cuda("fill_uniform"); }

}  // namespace uoe::cuda
