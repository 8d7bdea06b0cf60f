// CPU-only build: the CUDA entry points exist and raise a clear error.
#include "core/error.h"
#include "cuda/cuda_api.h"

namespace uoe::cuda {

bool is_available() { return false; }
int device_count() { return 0; }
void set_device(int device) {
  fail("[set_device] cuda:", device, " needs a CUDA build (configure with UOE_CUDA=ON)");
}

}  // namespace uoe::cuda
