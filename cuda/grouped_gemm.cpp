// Grouped GEMM (cuda/grouped_gemm.h) on cublasGemmGroupedBatchedEx / cublasDgemmGroupedBatched.
//
// Row-major to column-major as in cuda/gemm.cpp: the row-major C = op(A) op(B) is the column-major
// C^T = op(B)^T op(A)^T, so cuBLAS's "A" is our B (transposed iff trans_b), its "B" is our A (transposed iff
// trans_a), with m = N, n = M, k = K and the leading dimensions unchanged. Problems with equal parameters form
// one group; the pointer arrays (device memory, as cuBLAS requires) are uploaded in one copy per call.
#include "cuda/grouped_gemm.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <tuple>
#include <type_traits>

#include "core/error.h"
#include "core/slow_paths.h"
#include "cuda/blas_handle.h"
#include "cuda/host_upload.h"
#include "cuda/launch.h"
#include "ops/kernels/gemm.h"

namespace uoe::cuda {
namespace {

// Whether cuBLAS takes CUBLAS_COMPUTE_32F_FAST_TF32 for a grouped float32 call; once it refuses one, float32
// groups run with exact float32 compute.
std::atomic<bool> g_grouped_tf32_supported{true};

std::mutex g_fallback_mu;
std::string g_fallback;  // grouped_gemm_fallback()

template <typename T>
struct Traits;
template <>
struct Traits<float> {
  using Scalar = float;
  static constexpr cudaDataType_t data = CUDA_R_32F;
};
template <>
struct Traits<BFloat16> {
  using Scalar = float;
  static constexpr cudaDataType_t data = CUDA_R_16BF;
};
template <>
struct Traits<double> {
  using Scalar = double;
  static constexpr cudaDataType_t data = CUDA_R_64F;
};

// One problem in cuBLAS's column-major terms; `key` orders problems so that equal parameters are adjacent.
struct ColumnMajor {
  cublasOperation_t op_a, op_b;
  int64_t m, n, k, lda, ldb, ldc;
  bool accumulate;
  const void *a, *b;
  void* c;
  auto key() const { return std::tie(op_a, op_b, m, n, k, lda, ldb, ldc, accumulate); }
};

// The arrays of one cuBLAS grouped call: per group (host) and per problem (pointers, device).
template <typename Scalar>
struct GroupedCall {
  std::vector<cublasOperation_t> op_a, op_b;
  std::vector<int64_t> m, n, k, lda, ldb, ldc, size;
  std::vector<Scalar> alpha, beta;
  std::vector<const void*> pointers;  // all A pointers, then all B, then all C, in group order
  int64_t count() const { return int64_t(size.size()); }
};

template <typename Scalar>
GroupedCall<Scalar> group(std::vector<ColumnMajor>& problems) {
  std::stable_sort(problems.begin(), problems.end(),
                   [](const ColumnMajor& x, const ColumnMajor& y) { return x.key() < y.key(); });
  GroupedCall<Scalar> g;
  const size_t P = problems.size();
  g.pointers.resize(3 * P);
  for (size_t i = 0; i < P; ++i) {
    const ColumnMajor& p = problems[i];
    if (i == 0 || p.key() != problems[i - 1].key()) {
      g.op_a.push_back(p.op_a);
      g.op_b.push_back(p.op_b);
      g.m.push_back(p.m);
      g.n.push_back(p.n);
      g.k.push_back(p.k);
      g.lda.push_back(p.lda);
      g.ldb.push_back(p.ldb);
      g.ldc.push_back(p.ldc);
      g.alpha.push_back(Scalar(1));
      g.beta.push_back(Scalar(p.accumulate ? 1 : 0));
      g.size.push_back(0);
    }
    ++g.size.back();
    g.pointers[i] = p.a;
    g.pointers[P + i] = p.b;
    g.pointers[2 * P + i] = p.c;
  }
  return g;
}

// One cuBLAS grouped call; returns its status (the caller decides what NOT_SUPPORTED means).
template <typename T>
cublasStatus_t grouped_call(cublasHandle_t h, const GroupedCall<typename Traits<T>::Scalar>& g, const void* const* d_a,
                            const void* const* d_b, void* const* d_c, cublasComputeType_t compute) {
  if constexpr (std::is_same_v<T, double>)
    return cublasDgemmGroupedBatched_64(h, g.op_a.data(), g.op_b.data(), g.m.data(), g.n.data(), g.k.data(),
                                        g.alpha.data(), reinterpret_cast<const double* const*>(d_a), g.lda.data(),
                                        reinterpret_cast<const double* const*>(d_b), g.ldb.data(), g.beta.data(),
                                        reinterpret_cast<double* const*>(d_c), g.ldc.data(), g.count(),
                                        g.size.data());
  else
    return cublasGemmGroupedBatchedEx_64(h, g.op_a.data(), g.op_b.data(), g.m.data(), g.n.data(), g.k.data(),
                                         g.alpha.data(), d_a, Traits<T>::data, g.lda.data(), d_b, Traits<T>::data,
                                         g.ldb.data(), g.beta.data(), d_c, Traits<T>::data, g.ldc.data(), g.count(),
                                         g.size.data(), compute);
}

// Whether cuBLAS declined the grouped call (its types, compute type or this GPU), rather than failed running it.
bool refused(cublasStatus_t s) { return s == CUBLAS_STATUS_NOT_SUPPORTED || s == CUBLAS_STATUS_ARCH_MISMATCH; }

// The fallback: one cuda::gemm per problem (row-major terms).
template <typename T>
void one_by_one(const std::vector<GemmProblem<T>>& problems, const char* op) {
  for (const GemmProblem<T>& p : problems) {
    if (p.M == 0 || p.N == 0 || p.K == 0) continue;  // done by the caller
    if constexpr (std::is_same_v<T, BFloat16>)
      gemm_bf16(p.trans_a, p.trans_b, p.M, p.N, p.K, 1.0f, p.A, p.lda, p.B, p.ldb, p.accumulate ? 1.0f : 0.0f, p.C,
                p.ldc, op);
    else
      gemm<T>(p.trans_a, p.trans_b, p.M, p.N, p.K, T(1), p.A, p.lda, p.B, p.ldb, T(p.accumulate ? 1 : 0), p.C,
              p.ldc, op);
  }
}

// Counts a call some of whose problems ran one cuda::gemm each (core/slow_paths.h); `refusal`: why cuBLAS refused
// the grouped call ("" when it was the unaligned problems alone).
void count_per_problem(const char* op, size_t unaligned, size_t total, const std::string& refusal) {
  const std::string cost = "; one GEMM launch each instead of sharing one grouped call (slower with many small experts)";
  if (!refusal.empty())
    slow_paths::count("grouped_gemm_per_problem.refused", std::string(op) + ": " + refusal + ", so all " +
                                                              std::to_string(total) + " GEMMs ran one by one" + cost);
  else
    slow_paths::count("grouped_gemm_per_problem.misaligned",
                      std::string(op) + ": " + std::to_string(unaligned) + " of " + std::to_string(total) +
                          " GEMMs have a bf16 (or TF32) matrix that is not 16-byte aligned, which cuBLAS's grouped "
                          "call needs" + cost);
}

}  // namespace

template <typename T>
void gemm_grouped(const std::vector<GemmProblem<T>>& problems, const char* op) {
  using Scalar = typename Traits<T>::Scalar;
  const LaunchContext c = launch_context(op);
  // cuBLAS cannot see the matrix pointers of a grouped call (they are in device memory). For bfloat16, or a FAST
  // (TF32) compute type, its documentation requires them "properly aligned to avoid misaligned memory access
  // errors", ideally to 16 bytes: a problem with a less aligned A, B or C (a row offset into a gathered block, a
  // neuron offset r0 into a weight) runs through cuda::gemm instead, whose cuBLASLt call is told every alignment.
  const bool needs_alignment =
      std::is_same_v<T, BFloat16> || (std::is_same_v<T, float> && allow_tf32() && g_grouped_tf32_supported.load());
  std::vector<GemmProblem<T>> unaligned;
  std::vector<ColumnMajor> cm;
  cm.reserve(problems.size());
  for (const GemmProblem<T>& p : problems) {
    UOE_CHECK(p.M >= 0 && p.N >= 0 && p.K >= 0, "[", op, "] grouped GEMM with a negative size (M=", p.M,
              ", N=", p.N, ", K=", p.K, ")");
    if (p.M == 0 || p.N == 0) continue;
    if (p.K == 0) {  // an empty sum: C = 0, or C unchanged
      if (!p.accumulate)
        UOE_CUDA_CHECK(op, cudaMemset2DAsync(p.C, size_t(p.ldc) * sizeof(T), 0, size_t(p.N) * sizeof(T),
                                             size_t(p.M), c.stream));
      continue;
    }
    UOE_CHECK(p.ldc >= p.N && p.lda >= (p.trans_a ? p.M : p.K) && p.ldb >= (p.trans_b ? p.K : p.N), "[", op,
              "] grouped GEMM leading dimensions (", p.lda, ", ", p.ldb, ", ", p.ldc,
              ") are shorter than the rows they hold");
    if (needs_alignment && !(aligned16(p.A) && aligned16(p.B) && aligned16(p.C))) {
      unaligned.push_back(p);
      continue;
    }
    cm.push_back({p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, p.N, p.M, p.K,
                  p.ldb, p.lda, p.ldc, p.accumulate, p.B, p.A, p.C});
  }
  if (cm.empty()) {
    {
      std::lock_guard<std::mutex> lock(g_fallback_mu);
      g_fallback.clear();
    }
    if (!unaligned.empty()) count_per_problem(op, unaligned.size(), unaligned.size(), "");
    one_by_one(unaligned, op);
    return;
  }
  const GroupedCall<Scalar> g = group<Scalar>(cm);
  const size_t P = cm.size();
  DeviceBuffer pointers(c.device, g.pointers.size() * sizeof(void*));
  upload_async(pointers.get<void>(), g.pointers.data(), g.pointers.size() * sizeof(void*), c.device, c.stream, op);
  void** base = pointers.get<void*>();
  const void* const* d_a = const_cast<const void* const*>(base);
  const void* const* d_b = d_a + P;
  void* const* d_c = base + 2 * P;

  cublasStatus_t status = CUBLAS_STATUS_SUCCESS;
  with_blas_handle(c.stream, op, [&](cublasHandle_t h) {
    if constexpr (std::is_same_v<T, float>) {
      if (allow_tf32() && g_grouped_tf32_supported.load()) {
        status = grouped_call<T>(h, g, d_a, d_b, d_c, CUBLAS_COMPUTE_32F_FAST_TF32);
        if (!refused(status)) return;
        g_grouped_tf32_supported.store(false);  // refused (the compute type): exact float32 from now on
      }
    }
    status = grouped_call<T>(h, g, d_a, d_b, d_c, std::is_same_v<T, double> ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F);
  });
  const char* call = std::is_same_v<T, double> ? "cublasDgemmGroupedBatched_64" : "cublasGemmGroupedBatchedEx_64";
  // Any other failure is an error, not a reason to run the problems another way.
  if (!refused(status)) check_blas(status, op, call);
  std::string reason;
  if (status != CUBLAS_STATUS_SUCCESS) {
    reason = std::string(call) + " returned " + cublasGetStatusName(status) + " for " + std::to_string(P) + " problems";
    static std::once_flag warned;
    std::call_once(warned, [&] {
      std::fprintf(stderr, "[%s] warning: %s; running one GEMM per problem instead\n", op, reason.c_str());
    });
  }
  {
    std::lock_guard<std::mutex> lock(g_fallback_mu);
    g_fallback = reason;
  }
  if (!reason.empty() || !unaligned.empty()) count_per_problem(op, unaligned.size(), P + unaligned.size(), reason);
  one_by_one(reason.empty() ? unaligned : problems, op);  // refused: every problem one by one
}

std::string grouped_gemm_fallback() {
  std::lock_guard<std::mutex> lock(g_fallback_mu);
  return g_fallback;
}

template void gemm_grouped<float>(const std::vector<GemmProblem<float>>&, const char*);
template void gemm_grouped<double>(const std::vector<GemmProblem<double>>&, const char*);
template void gemm_grouped<BFloat16>(const std::vector<GemmProblem<BFloat16>>&, const char*);

}  // namespace uoe::cuda
