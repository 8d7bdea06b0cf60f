// Error checks for every CUDA runtime, cuBLAS/cuBLASLt and NCCL call: the message names the op and the call.
#pragma once
#include <cuda_runtime.h>

#include "core/error.h"

namespace uoe::cuda {

// Raises "[op] <what> failed: <CUDA error string>" (the sticky error is cleared first where possible).
void check_cuda(cudaError_t e, const char* op, const char* what);
// After a kernel launch: the launch error (bad configuration, missing kernel image for this GPU, ...).
void check_launch(const char* op);

}  // namespace uoe::cuda

// UOE_CUDA_CHECK(op, call): runs `call` (a cudaError_t expression) and raises naming op and the call text.
#define UOE_CUDA_CHECK(op, call) ::uoe::cuda::check_cuda((call), (op), #call)
