// Grouped GEMM: many independent row-major GEMMs of different sizes issued as one cuBLAS grouped call
// (cublasGemmGroupedBatchedEx), so that small per-expert problems fill the GPU together instead of one launch
// each. The conventions are cuda::gemm's (ops/kernels/gemm.h) with alpha = 1.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "core/half.h"

namespace uoe::cuda {

// C = op(A) op(B), or C += op(A) op(B) when `accumulate`; op(A) is [M, K] (trans_a: A stored [K, M]), op(B) is
// [K, N] (trans_b: B stored [N, K]); every matrix row-major with its leading dimension.
template <typename T>  // float, double, BFloat16 (float32 accumulation)
struct GemmProblem {
  bool trans_a, trans_b;
  int64_t M, N, K;
  const T* A;
  int64_t lda;
  const T* B;
  int64_t ldb;
  T* C;
  int64_t ldc;
  bool accumulate;
};

// Runs every problem on the current stream of the current device, all in one cuBLAS call (problems of identical
// shape share a group); float32 uses TF32 when cuda::allow_tf32() (exact float32 where cuBLAS refuses TF32 for
// grouped calls). Problems with M or N == 0 do nothing; K == 0 writes C = 0 (leaves C when accumulating). The
// problems run concurrently: no C may overlap another problem's A, B or C. bfloat16 (and TF32) problems with a
// matrix not 16-byte aligned run one cuda::gemm each, outside the grouped call. Where cuBLAS refuses the grouped
// call, the problems run one cuda::gemm each instead (slower, same results), with one warning on stderr and the
// reason kept for grouped_gemm_fallback(). Either way the call is counted as a slow path (core/slow_paths.h:
// grouped_gemm_per_problem.misaligned or .refused). `op` names the caller in errors and in that count.
template <typename T>
void gemm_grouped(const std::vector<GemmProblem<T>>& problems, const char* op);

// Why the last gemm_grouped call ran its problems one by one ("" when it made one grouped call).
std::string grouped_gemm_fallback();

extern template void gemm_grouped<float>(const std::vector<GemmProblem<float>>&, const char*);
extern template void gemm_grouped<double>(const std::vector<GemmProblem<double>>&, const char*);
extern template void gemm_grouped<BFloat16>(const std::vector<GemmProblem<BFloat16>>&, const char*);

}  // namespace uoe::cuda
