// CUDA GEMM API (cuBLASLt): the CPU GEMM's signatures on device pointers, plus bfloat16 with float32
// accumulation. All calls run on cuda::current_stream of the current device.
#pragma once
#include <cstdint>

#include "core/half.h"

namespace uoe::cuda {

// C = alpha * op(A) * op(B) + beta * C, row-major everywhere, exactly as uoe::cpu::gemm (ops/cpu/gemm.h):
// op(A) is [M,K] (trans_a: A stored [K,M]), op(B) is [K,N] (trans_b: B stored [N,K]); beta == 0: C not read.
// Errors name `op`, the op the GEMM computes for.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc, const char* op = "matmul");
// Strided batch as uoe::cpu::gemm_batched (stride 0 = broadcast operand).
template <typename T>
void gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
                  int64_t stride_c, const char* op = "matmul");

// bfloat16 operands and result, float32 accumulation and scaling.
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A, int64_t lda,
               const BFloat16* B, int64_t ldb, float beta, BFloat16* C, int64_t ldc, const char* op = "matmul");
void gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const BFloat16* A, int64_t lda, int64_t stride_a, const BFloat16* B, int64_t ldb,
                       int64_t stride_b, float beta, BFloat16* C, int64_t ldc, int64_t stride_c,
                       const char* op = "matmul");

// float32 GEMMs may use TF32 tensor cores (10-bit mantissa inputs, float32 accumulation). Default: off
// (exact float32, the CPU-parity setting); nn::train on a GPU turns it on for the run.
void set_allow_tf32(bool allow);
bool allow_tf32();

extern template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*,
                                 int64_t, float, float*, int64_t, const char*);
extern template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                                  int64_t, double, double*, int64_t, const char*);
extern template void gemm_batched<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                         int64_t, const float*, int64_t, int64_t, float, float*, int64_t, int64_t,
                                         const char*);
extern template void gemm_batched<double>(int64_t, bool, bool, int64_t, int64_t, int64_t, double, const double*,
                                          int64_t, int64_t, const double*, int64_t, int64_t, double, double*, int64_t,
                                          int64_t, const char*);

}  // namespace uoe::cuda
