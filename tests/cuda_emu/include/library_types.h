// A CPU stand-in for CUDA's library_types.h (tests/cuda_emu): the data types the cuBLAS stand-ins (cublas_v2.h,
// cublasLt.h) name, with CUDA's values. Not CUDA's header: only what the project uses.
#pragma once

typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_64F = 1,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
} cudaDataType;
