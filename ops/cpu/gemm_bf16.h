// Public bfloat16 CPU GEMM API of uoe: bfloat16 operands, products summed in float32 (AMX, AVX512-BF16, or the
// float GEMM where the CPU has neither; ops/cpu/gemm_isa.h picks and can pin the path).
#pragma once

#include <cstdint>

#include "core/half.h"

namespace uoe::cpu {

// C = alpha * op(A) * op(B) + beta * C with the conventions of gemm (gemm.h); C float32, or bfloat16 rounded once
// (to nearest even) from the float32 result. Bit-identical whatever the OpenMP thread count.
template <typename TC>
void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
               int64_t lda, const BFloat16* B, int64_t ldb, float beta, TC* C, int64_t ldc);

// batch independent GEMMs as gemm_batched (gemm.h) does them.
template <typename TC>
void gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const BFloat16* A, int64_t lda, int64_t stride_a, const BFloat16* B, int64_t ldb,
                       int64_t stride_b, float beta, TC* C, int64_t ldc, int64_t stride_c);

extern template void gemm_bf16<float>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                                      const BFloat16*, int64_t, float, float*, int64_t);
extern template void gemm_bf16<BFloat16>(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t,
                                         const BFloat16*, int64_t, float, BFloat16*, int64_t);
extern template void gemm_batched_bf16<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float,
                                              const BFloat16*, int64_t, int64_t, const BFloat16*, int64_t, int64_t,
                                              float, float*, int64_t, int64_t);
extern template void gemm_batched_bf16<BFloat16>(int64_t, bool, bool, int64_t, int64_t, int64_t, float,
                                                 const BFloat16*, int64_t, int64_t, const BFloat16*, int64_t,
                                                 int64_t, float, BFloat16*, int64_t, int64_t);

}  // namespace uoe::cpu
