// Error checks of CUDA runtime calls and kernel launches (cuda/check.h).
#include "cuda/check.h"

namespace uoe::cuda {

void check_cuda(cudaError_t e, const char* op, const char* what) {
  if (e == cudaSuccess) return;
  // Clears the error if it is not sticky, so that one failure does not poison the next unrelated call.
  (void)cudaGetLastError();
  fail("[", op, "] ", what, " failed: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

void check_launch(const char* op) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return;
  fail("[", op, "] kernel launch failed: ", cudaGetErrorName(e), ": ", cudaGetErrorString(e));
}

}  // namespace uoe::cuda
