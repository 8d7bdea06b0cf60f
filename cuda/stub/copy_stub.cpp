// CPU-only build: the CUDA copy kernels (ops/kernels/copy.h) exist and raise, naming the op. Unreachable from the
// library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/copy.h"

namespace uoe::cuda {

void copy_cast(const Tensor&, const Tensor&) { no_cuda("copy_cast"); }
void fill(const Tensor&, double) { no_cuda("fill"); }
void copy_bytes(void*, Device dst, const void*, Device src, size_t) {
  fail("[to] copying between ", src.str(), " and ", dst.str(), " needs a CUDA build (configure with UOE_CUDA=ON)");
}

}  // namespace uoe::cuda
