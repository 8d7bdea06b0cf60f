// The GEMM's degenerate case on the GPU (K == 0 or alpha == 0): C = beta * C for `batch` row-major M x N
// matrices (beta == 0 writes zeros without reading C). Used by cuda/gemm.cpp.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace uoe::cuda::detail {

void gemm_scale_c(int64_t batch, int64_t M, int64_t N, float beta, float* C, int64_t ldc, int64_t stride_c,
                  cudaStream_t stream);
void gemm_scale_c(int64_t batch, int64_t M, int64_t N, double beta, double* C, int64_t ldc, int64_t stride_c,
                  cudaStream_t stream);
// C holds bfloat16 bit patterns (uoe::BFloat16); scaled in float32 and rounded to nearest even.
void gemm_scale_c_bf16(int64_t batch, int64_t M, int64_t N, float beta, uint16_t* C, int64_t ldc, int64_t stride_c,
                       cudaStream_t stream);

}  // namespace uoe::cuda::detail
