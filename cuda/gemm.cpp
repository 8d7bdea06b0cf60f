// CUDA GEMM (ops/kernels/gemm.h) on cuBLASLt: one handle per device, one 32 MiB workspace per (device, stream).
//
// Row-major to column-major: a row-major [R, C] matrix with row stride ld is, read column-major, its transpose
// [C, R] with leading dimension ld. So the row-major C = op(A) op(B) is computed as the column-major
// C^T = op(B)^T op(A)^T: cuBLASLt's "A" is our B (transposed iff trans_b), its "B" is our A (transposed iff
// trans_a), and the problem is m = N, n = M, k = K, with every leading dimension unchanged. When cuBLASLt's
// heuristic offers no algorithm for a problem (unusual leading dimensions or alignments), the same column-major
// problem runs through cublasGemmStridedBatchedEx instead.
#include "ops/kernels/gemm.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "core/error.h"
#include "cuda/blas_handle.h"
#include "cuda/caching_allocator.h"
#include "cuda/check.h"
#include "cuda/gemm_scale.h"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

constexpr size_t kWorkspaceBytes = size_t(32) << 20;
constexpr size_t kMaxCachedAlgos = 4096;

std::atomic<bool> g_allow_tf32{false};

// `op` names the op in errors: the caller of the GEMM (matmul, expert_ffn, ...).
#define UOE_BLAS_CHECK(call) check_blas((call), op, #call)

// ---- per-device handles and workspaces ----------------------------------------------------------------------

struct DeviceState {
  cublasLtHandle_t handle = nullptr;
  std::map<cudaStream_t, void*> workspaces;  // one per stream, so that GEMMs on two streams never share one
};

// Handle/workspace lookups, and the heuristic cache, behind one mutex; never destroyed (GEMMs may run during
// static destruction of other objects, and the CUDA context may already be gone at exit).
std::mutex g_mu;
std::vector<DeviceState>& device_states() {
  static auto* states = new std::vector<DeviceState>();
  return *states;
}

struct Context {
  cublasLtHandle_t handle;
  void* workspace;
  cudaStream_t stream;
};

Context context_for_current_device(const char* op) {
  int device = 0;
  UOE_CUDA_CHECK(op, cudaGetDevice(&device));
  const cudaStream_t stream = current_stream(device);
  std::lock_guard<std::mutex> lock(g_mu);
  auto& states = device_states();
  if (states.size() <= size_t(device)) states.resize(size_t(device) + 1);
  DeviceState& st = states[size_t(device)];
  if (!st.handle) UOE_BLAS_CHECK(cublasLtCreate(&st.handle));
  void*& ws = st.workspaces[stream];
  if (!ws) {
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, kWorkspaceBytes);
    if (e == cudaErrorMemoryAllocation) {  // memory cached by the tensor allocator may be what is missing
      (void)cudaGetLastError();
      caching_allocator().empty_cache();
      e = cudaMalloc(&p, kWorkspaceBytes);
    }
    check_cuda(e, op, "cudaMalloc of the cuBLASLt workspace");
    ws = p;
  }
  return {st.handle, ws, stream};
}

// ---- RAII descriptors -----------------------------------------------------------------------------------------

struct MatmulDesc {
  cublasLtMatmulDesc_t d = nullptr;
  MatmulDesc(const char* op, cublasComputeType_t compute, cudaDataType_t scale) {
    UOE_BLAS_CHECK(cublasLtMatmulDescCreate(&d, compute, scale));
  }
  ~MatmulDesc() {
    if (d) (void)cublasLtMatmulDescDestroy(d);
  }
  MatmulDesc(const MatmulDesc&) = delete;
  MatmulDesc& operator=(const MatmulDesc&) = delete;
};

struct Layout {
  cublasLtMatrixLayout_t d = nullptr;
  Layout(const char* op, cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld, int64_t batch,
         int64_t stride) {
    UOE_BLAS_CHECK(cublasLtMatrixLayoutCreate(&d, type, rows, cols, ld));
    if (batch > 1) {
      const int32_t count = int32_t(batch);
      UOE_BLAS_CHECK(cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
      UOE_BLAS_CHECK(
          cublasLtMatrixLayoutSetAttribute(d, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride));
    }
  }
  ~Layout() {
    if (d) (void)cublasLtMatrixLayoutDestroy(d);
  }
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
};

struct Preference {
  cublasLtMatmulPreference_t d = nullptr;
  const char* op;
  explicit Preference(const char* op_name) : op(op_name) { UOE_BLAS_CHECK(cublasLtMatmulPreferenceCreate(&d)); }
  ~Preference() {
    if (d) (void)cublasLtMatmulPreferenceDestroy(d);
  }
  Preference(const Preference&) = delete;
  Preference& operator=(const Preference&) = delete;
  void set(cublasLtMatmulPreferenceAttributes_t attr, const void* value, size_t size) {
    UOE_BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d, attr, value, size));
  }
};

// ---- the call -------------------------------------------------------------------------------------------------

struct GemmTypes {
  cudaDataType_t data;        // A, B and C
  cudaDataType_t scale;       // alpha and beta
  cublasComputeType_t compute;
  size_t elem;                // bytes per element of A, B, C
};

// Largest power of two (at most 256) dividing the address of every matrix of the batch.
uint32_t alignment_of(const void* p, int64_t batch, int64_t stride, size_t elem) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p));
  if (batch > 1) bits |= uint64_t(stride) * elem;
  uint32_t a = 256;
  while (a > 1 && bits % a != 0) a /= 2;
  return a;
}

// A stored column-major matrix's leading dimension: any value works for a single column, cuBLASLt still
// wants ld >= rows.
int64_t leading_dim(const char* op, const char* name, int64_t ld, int64_t rows, int64_t cols) {
  if (cols <= 1) return std::max<int64_t>({ld, rows, 1});
  UOE_CHECK(ld >= rows, "[", op, "] leading dimension of ", name, " is ", ld, " but its rows hold ", rows,
            " elements");
  return ld;
}

// Heuristic results by problem (everything the choice depends on); nullopt: cuBLASLt has none, use cuBLAS.
using AlgoKey = std::array<int64_t, 18>;
std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>>& algo_cache() {
  static auto* cache = new std::map<AlgoKey, std::optional<cublasLtMatmulAlgo_t>>();
  return *cache;
}

// The problem in cuBLAS's column-major terms (see the top of this file).
struct ColumnMajorProblem {
  cublasOperation_t op_a, op_b;
  int64_t m, n, k;
  const void* a;  // our B
  int64_t lda, stride_a;
  const void* b;  // our A
  int64_t ldb, stride_b;
  void* c;
  int64_t ldc, stride_c;
  int64_t batch;
};

void cublas_fallback(const GemmTypes& t, const ColumnMajorProblem& p, const void* alpha, const void* beta,
                     cudaStream_t stream, const char* op) {
  with_blas_handle(stream, op, [&](cublasHandle_t blas) {
    check_blas(cublasGemmStridedBatchedEx_64(blas, p.op_a, p.op_b, p.m, p.n, p.k, alpha, p.a, t.data, p.lda,
                                             p.stride_a, p.b, t.data, p.ldb, p.stride_b, beta, p.c, t.data, p.ldc,
                                             p.stride_c, p.batch, t.compute, CUBLAS_GEMM_DEFAULT),
               op, "cublasGemmStridedBatchedEx_64");
  });
}

// C = alpha op(A) op(B) + beta C for batch >= 1, M, N, K >= 1 (row-major, as ops/kernels/gemm.h).
void lt_matmul(const GemmTypes& t, int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K,
               const void* alpha, const void* A, int64_t lda, int64_t stride_a, const void* B, int64_t ldb,
               int64_t stride_b, const void* beta, void* C, int64_t ldc, int64_t stride_c, const char* op) {
  const Context ctx = context_for_current_device(op);
  // Column-major view: "A" = our B stored [K,N] (or [N,K] when trans_b), "B" = our A stored [M,K] (or [K,M]).
  const int64_t a_rows = trans_b ? K : N, a_cols = trans_b ? N : K;
  const int64_t b_rows = trans_a ? M : K, b_cols = trans_a ? K : M;
  const ColumnMajorProblem p{trans_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                             trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                             N,
                             M,
                             K,
                             B,
                             leading_dim(op, "B", ldb, a_rows, a_cols),
                             stride_b,
                             A,
                             leading_dim(op, "A", lda, b_rows, b_cols),
                             stride_a,
                             C,
                             leading_dim(op, "C", ldc, N, M),
                             stride_c,
                             batch};

  MatmulDesc desc(op, t.compute, t.scale);
  UOE_BLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSA, &p.op_a, sizeof p.op_a));
  UOE_BLAS_CHECK(cublasLtMatmulDescSetAttribute(desc.d, CUBLASLT_MATMUL_DESC_TRANSB, &p.op_b, sizeof p.op_b));
  Layout la(op, t.data, uint64_t(a_rows), uint64_t(a_cols), p.lda, batch, p.stride_a);
  Layout lb(op, t.data, uint64_t(b_rows), uint64_t(b_cols), p.ldb, batch, p.stride_b);
  Layout lc(op, t.data, uint64_t(N), uint64_t(M), p.ldc, batch, p.stride_c);

  const uint32_t align_a = alignment_of(p.a, batch, p.stride_a, t.elem);
  const uint32_t align_b = alignment_of(p.b, batch, p.stride_b, t.elem);
  const uint32_t align_c = alignment_of(p.c, batch, p.stride_c, t.elem);
  int device = 0;
  UOE_CUDA_CHECK(op, cudaGetDevice(&device));
  const AlgoKey key{device, int64_t(t.data), int64_t(t.compute), trans_a, trans_b, M,       N,       K,       lda,
                    ldb,    ldc,             batch,              stride_a, stride_b, stride_c, align_a, align_b, align_c};

  std::optional<cublasLtMatmulAlgo_t> algo;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = algo_cache().find(key);
    if (it != algo_cache().end()) {
      algo = it->second;
      cached = true;
    }
  }
  if (!cached) {
    Preference pref(op);
    const uint64_t ws = kWorkspaceBytes;
    pref.set(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c);
    pref.set(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s =
        cublasLtMatmulAlgoGetHeuristic(ctx.handle, desc.d, la.d, lb.d, lc.d, lc.d, pref.d, 1, &result, &found);
    if (s != CUBLAS_STATUS_SUCCESS && s != CUBLAS_STATUS_NOT_SUPPORTED) check_blas(s, op, "cublasLtMatmulAlgoGetHeuristic");
    if (s == CUBLAS_STATUS_SUCCESS && found > 0) algo = result.algo;
    std::lock_guard<std::mutex> lock(g_mu);
    if (algo_cache().size() >= kMaxCachedAlgos) algo_cache().clear();
    algo_cache().emplace(key, algo);
  }
  if (!algo) return cublas_fallback(t, p, alpha, beta, ctx.stream, op);
  check_blas(cublasLtMatmul(ctx.handle, desc.d, alpha, p.a, la.d, p.b, lb.d, beta, p.c, lc.d, p.c, lc.d, &*algo,
                            ctx.workspace, kWorkspaceBytes, ctx.stream),
             op, "cublasLtMatmul");
}

// The shared driver: the CPU GEMM's edge cases, then one batched cuBLASLt call (one call per matrix when C is
// shared by the batch).
template <typename T, typename S, typename Scale>
void run_gemm(const GemmTypes& types, Scale&& scale_c, int64_t batch, bool trans_a, bool trans_b, int64_t M,
              int64_t N, int64_t K, S alpha, const T* A, int64_t lda, int64_t stride_a, const T* B, int64_t ldb,
              int64_t stride_b, S beta, T* C, int64_t ldc, int64_t stride_c, const char* op) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == S(0)) {
    int device = 0;
    UOE_CUDA_CHECK(op, cudaGetDevice(&device));
    scale_c(batch, M, N, beta, C, ldc, stride_c, current_stream(device));
    return;
  }
  if (batch > 1 && stride_c == 0) {
    // A C shared by the batch is accumulated matrix after matrix, in order, as the CPU GEMM does.
    for (int64_t b = 0; b < batch; ++b)
      lt_matmul(types, 1, trans_a, trans_b, M, N, K, &alpha, A + b * stride_a, lda, 0, B + b * stride_b, ldb, 0,
                &beta, C, ldc, 0, op);
    return;
  }
  lt_matmul(types, batch, trans_a, trans_b, M, N, K, &alpha, A, lda, stride_a, B, ldb, stride_b, &beta, C, ldc,
            stride_c, op);
}

template <typename T>
GemmTypes types_of();
template <>
GemmTypes types_of<float>() {
  return {CUDA_R_32F, CUDA_R_32F, g_allow_tf32.load() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F,
          sizeof(float)};
}
template <>
GemmTypes types_of<double>() {
  return {CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F, sizeof(double)};
}

}  // namespace

void set_allow_tf32(bool allow) { g_allow_tf32.store(allow); }
bool allow_tf32() { return g_allow_tf32.load(); }

template <typename T>
void gemm_batched(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A,
                  int64_t lda, int64_t stride_a, const T* B, int64_t ldb, int64_t stride_b, T beta, T* C, int64_t ldc,
                  int64_t stride_c, const char* op) {
  auto scale = [](int64_t b, int64_t m, int64_t n, T s, T* c, int64_t ld, int64_t sc, cudaStream_t st) {
    detail::gemm_scale_c(b, m, n, s, c, ld, sc, st);
  };
  run_gemm<T, T>(types_of<T>(), scale, batch, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b,
                 beta, C, ldc, stride_c, op);
}

template <typename T>
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, T alpha, const T* A, int64_t lda, const T* B,
          int64_t ldb, T beta, T* C, int64_t ldc, const char* op) {
  gemm_batched<T>(1, trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, op);
}

void gemm_batched_bf16(int64_t batch, bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
                       const BFloat16* A, int64_t lda, int64_t stride_a, const BFloat16* B, int64_t ldb,
                       int64_t stride_b, float beta, BFloat16* C, int64_t ldc, int64_t stride_c, const char* op) {
  static_assert(sizeof(BFloat16) == 2, "BFloat16 must be the 16-bit pattern cuBLASLt reads as CUDA_R_16BF");
  auto scale = [](int64_t b, int64_t m, int64_t n, float s, BFloat16* c, int64_t ld, int64_t sc, cudaStream_t st) {
    detail::gemm_scale_c_bf16(b, m, n, s, reinterpret_cast<uint16_t*>(c), ld, sc, st);
  };
  const GemmTypes types{CUDA_R_16BF, CUDA_R_32F, CUBLAS_COMPUTE_32F, sizeof(BFloat16)};
  run_gemm<BFloat16, float>(types, scale, batch, trans_a, trans_b, M, N, K, alpha, A, lda, stride_a, B, ldb, stride_b,
                            beta, C, ldc, stride_c, op);
}

void gemm_bf16(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha, const BFloat16* A,
               int64_t lda, const BFloat16* B, int64_t ldb, float beta, BFloat16* C, int64_t ldc, const char* op) {
  gemm_batched_bf16(1, trans_a, trans_b, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, op);
}

template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t, const char*);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t, const char*);
template void gemm_batched<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                  int64_t, const float*, int64_t, int64_t, float, float*, int64_t, int64_t, const char*);
template void gemm_batched<double>(int64_t, bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                   int64_t, const double*, int64_t, int64_t, double, double*, int64_t, int64_t,
                                   const char*);

}  // namespace uoe::cuda
