// The GEMM kernel family, one declaration list for both backends: single and strided-batched row-major GEMM for
// float and double, and on bfloat16 (float32 accumulation); the GPU's with its TF32 switch. Implemented in
// ops/cpu/gemm.cpp and gemm_bf16.cpp (packed, ISA-dispatched; host pointers) and cuda/gemm.cpp (cuBLASLt; device
// pointers on the current device, on cuda::current_stream, asynchronous); a build without CUDA links stubs that raise (cuda/stub/). Callers pick the
// backend with UOE_KERNEL (ops/backend.h).
#pragma once
#include <cstdint>

#include "core/half.h"

#define UOE_GEMM_EXTERN(T)                                                                                          \
  extern template void gemm<T>(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T,  \
                               T*, int64_t, const char*);                                                          \
  extern template void gemm_batched<T>(int64_t, bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t,       \
                                       int64_t, const T*, int64_t, int64_t, T, T*, int64_t, int64_t, const char*);

// The family's declarations, the same in both backends' namespaces (T = float, double).
#define UOE_GEMM_KERNELS                                                                                            \
  /* C = alpha * op(A) * op(B) + beta * C, row-major everywhere.                                                    \
     op(A) is [M,K]: A stored [M,K] with row stride lda, or (trans_a) stored [K,M] with row stride lda.             \
     op(B) is [K,N]: B stored [K,N] with row stride ldb, or (trans_b) stored [N,K] with row stride ldb.             \
     beta == 0 means C is not read (it may hold NaN garbage). alpha == 0 or K == 0: C = beta * C (A and B are not   \
     read). Errors name `op`, the op the GEMM computes for (the CPU's raises none). CPU: bit-identical whatever the  \
     OpenMP thread count; called inside an active OpenMP parallel region, it runs single-threaded. */               \
  template <typename T>                                                                                             \
  void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda,          \
            const T* B, int64_t ldb, T beta, T* C, int64_t ldc, const char* op = "matmul");                         \
  /* batch independent GEMMs; matrix b uses A + b*stride_a, B + b*stride_b, C + b*stride_c (stride 0 = broadcast   \
     operand). CPU: parallel over the batch when matrices are small, inside each GEMM when they are large. */       \
  template <typename T>                                                                                             \
  void gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,            \
                    const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta,   \
                    T* C, int64_t ldc, int64_t stride_c, const char* op = "matmul");                                \
  /* bfloat16 operands and result, float32 accumulation and scaling, rounded once. CPU: AMX, AVX512-BF16, or the  \
     float GEMM where the CPU has neither (ops/cpu/gemm_bf16.h). */                                                 \
  void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,       \
                 int64_t lda, const BFloat16* B, int64_t ldb, float beta, BFloat16* C, int64_t ldc,                 \
                 const char* op = "matmul");                                                                        \
  void gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,   \
                         const BFloat16* A, int64_t lda, int64_t stride_a, const BFloat16* B, int64_t ldb,          \
                         int64_t stride_b, float beta, BFloat16* C, int64_t ldc, int64_t stride_c,                  \
                         const char* op = "matmul");                                                                \
  UOE_GEMM_EXTERN(float)                                                                                            \
  UOE_GEMM_EXTERN(double)

namespace uoe::cpu {
UOE_GEMM_KERNELS
}  // namespace uoe::cpu

namespace uoe::cuda {
UOE_GEMM_KERNELS

// float32 GEMMs may use TF32 tensor cores (10-bit mantissa inputs, float32 accumulation). Default: off (exact
// float32, the CPU-parity setting). Set through ops::set_allow_tf32 (ops/ops.h); a build without CUDA keeps it off.
void set_allow_tf32(bool allow);
bool allow_tf32();
}  // namespace uoe::cuda

#undef UOE_GEMM_KERNELS
#undef UOE_GEMM_EXTERN
