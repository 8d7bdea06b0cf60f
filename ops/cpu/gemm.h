// Public CPU GEMM API of uoe: single and batched row-major GEMM for float and double.
#pragma once

#include <cstdint>

namespace uoe::cpu {

// C = alpha * op(A) * op(B) + beta * C, row-major everywhere.
// op(A) is [M,K]: A stored [M,K] with row stride lda, or (trans_a) stored [K,M] with row stride lda.
// op(B) is [K,N]: B stored [K,N] with row stride ldb, or (trans_b) stored [N,K] with row stride ldb.
// beta == 0 means C is not read (it may hold NaN garbage). alpha == 0 or K == 0: C = beta * C
// (A and B are not read).
// Results are bit-identical whatever the OpenMP thread count. Called inside an active
// OpenMP parallel region, it runs single-threaded.
template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
          const T* A, int64_t lda, const T* B, int64_t ldb, T beta, T* C, int64_t ldc);

// batch independent GEMMs; matrix b uses A + b*stride_a, B + b*stride_b, C + b*stride_c
// (stride 0 = broadcast operand). Parallelises over the batch when matrices are small,
// inside each GEMM when they are large.
template <typename T>
void gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha,
                  const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b,
                  T beta, T* C, int64_t ldc, int64_t stride_c);

extern template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                 const float*, int64_t, float, float*, int64_t);
extern template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                  const double*, int64_t, double, double*, int64_t);
extern template void gemm_batched<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float,
                                         const float*, int64_t, int64_t, const float*, int64_t, int64_t,
                                         float, float*, int64_t, int64_t);
extern template void gemm_batched<double>(int64_t, bool, bool, int64_t, int64_t, int64_t, double,
                                          const double*, int64_t, int64_t, const double*, int64_t, int64_t,
                                          double, double*, int64_t, int64_t);

}  // namespace uoe::cpu
