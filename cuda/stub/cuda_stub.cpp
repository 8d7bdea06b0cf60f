// CPU-only build: the CUDA entry points exist and raise a clear error.
#include "core/error.h"
#include "cuda/cuda_api.h"
#include "cuda/random_kernels.h"

namespace uoe::cuda {

bool is_available() { return false; }
int device_count() { return 0; }
void set_device(int device) {
  fail("[set_device] cuda:", device, " needs a CUDA build (configure with UOE_CUDA=ON)");
}

// Unreachable in practice (a CPU-only build allocates no GPU tensor), but the op layer calls it without #if.
void fill_uniform(const Tensor& out, uint64_t, uint64_t, double, double) {
  fail("[rand] drawing on ", out.device().str(), " needs a CUDA build (configure with UOE_CUDA=ON)");
}

}  // namespace uoe::cuda
