// The cuBLAS (not cuBLASLt) handle of each device, shared by the calls that need the classic API: the GEMM
// fallback and grouped GEMMs.
#pragma once
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <functional>

namespace uoe::cuda {

// Runs `call` with the current device's cuBLAS handle bound to `stream`, under a lock, so that two threads never
// interleave setting the stream and the call. The handle is created on first use and never destroyed (GEMMs may
// run during static destruction, when the CUDA context may already be gone).
void with_blas_handle(cudaStream_t stream, const char* op, const std::function<void(cublasHandle_t)>& call);

// Raises "[op] <what> failed: <status name>: <status string>" unless s is CUBLAS_STATUS_SUCCESS.
void check_blas(cublasStatus_t s, const char* op, const char* what);

}  // namespace uoe::cuda
