// CPU-only build: the CUDA indexing kernels (ops/kernels/index.h) exist and raise, naming the op. Unreachable from
// the library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/index.h"

namespace uoe::cuda {

Tensor index_select(const Tensor&, int64_t, const Tensor&) { no_cuda("index_select"); }
Tensor index_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { no_cuda("index_add"); }
Tensor gather(const Tensor&, int64_t, const Tensor&) { no_cuda("gather"); }
Tensor scatter_add(const Tensor&, int64_t, const Tensor&, const Tensor&) { no_cuda("scatter_add"); }
std::pair<Tensor, Tensor> topk(const Tensor&, int64_t, int64_t, bool) { no_cuda("topk"); }
int64_t first_out_of_range(const Tensor&, int64_t) { no_cuda("index"); }

}  // namespace uoe::cuda
