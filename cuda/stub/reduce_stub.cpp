// CPU-only build: the CUDA reduce kernels (ops/kernels/reduce.h) exist and raise, naming the op. Unreachable from
// the library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/reduce.h"

namespace uoe::cuda {

Tensor reduce_sum(const Tensor&, const std::vector<bool>&) { no_cuda("reduce_sum"); }
std::pair<Tensor, Tensor> reduce_minmax(const Tensor&, int64_t, bool) { no_cuda("reduce_minmax"); }

}  // namespace uoe::cuda
