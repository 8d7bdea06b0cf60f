// A CPU stand-in for cuBLASLt (cublasLt.h) in tests/cuda_emu: the descriptors, the heuristic and cublasLtMatmul the
// CUDA backend uses, on the arithmetic of the cuBLAS stand-in (cublas_v2.h: types, rounding, stream order). Not an
// implementation of cuBLASLt.
//
// - Layouts are column-major. The A layout is A as stored (k x m when TRANSA is T), B likewise, C m x n; the layouts
//   must agree with each other and with the operations, every one's ld must hold its rows (and be at least 1), and
//   A, B and C must have one batch count: else CUBLAS_STATUS_INVALID_VALUE. Descriptor attributes the stand-in does
//   not implement are CUBLAS_STATUS_INVALID_VALUE too, so that none is silently ignored.
// - D must be C, with C's layout (all the backend needs): an out-of-place D is CUBLAS_STATUS_INVALID_VALUE.
// - The heuristic offers one algorithm. It needs no workspace; it remembers the types it was chosen for and the
//   alignments of A, B, C and D the preference promised (256 bytes unless set), and cublasLtMatmul with pointers
//   (or batch strides) less aligned, or other types, is CUBLAS_STATUS_INVALID_VALUE, where a GPU would misread.
#pragma once
#include <cublas_v2.h>

#include <cstring>

typedef enum {
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
} cublasLtMatrixLayoutAttribute_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

struct cublasLtContext {};
typedef struct cublasLtContext* cublasLtHandle_t;

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute;
  cudaDataType_t scale;
  cublasOperation_t trans_a = CUBLAS_OP_N, trans_b = CUBLAS_OP_N;
};
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType_t type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch = 1;
  int64_t stride = 0;  // elements from one matrix of the batch to the next
  bool operator==(const cublasLtMatrixLayoutOpaque_t&) const = default;
};
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;

struct cublasLtMatmulPreferenceOpaque_t {
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // bytes, of A, B, C and D
};
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

struct cublasLtMatmulAlgo_t {
  uint64_t data[8];
};
struct cublasLtMatmulHeuristicResult_t {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
};

namespace uoe::cuda_emu {

// Test hook: cublasLtMatmulAlgoGetHeuristic finds no algorithm (CUBLAS_STATUS_NOT_SUPPORTED, as cuBLASLt's answer
// when it has none).
inline std::atomic<bool> blas_no_heuristic{false};
// cublasLtMatmul calls that returned CUBLAS_STATUS_SUCCESS.
inline std::atomic<int> lt_matmul_calls{0};

// An attribute's value from (buf, size): INVALID_VALUE unless size is the attribute's.
template <class T>
cublasStatus_t attribute_value(const void* buf, size_t size, T* value) {
  if (!buf || size != sizeof(T)) return CUBLAS_STATUS_INVALID_VALUE;
  std::memcpy(value, buf, sizeof(T));
  return CUBLAS_STATUS_SUCCESS;
}

// The problem the descriptors describe, as a Gemm without pointers or scalars (see the top of this file).
inline cublasStatus_t lt_problem(const cublasLtMatmulDescOpaque_t* desc, const cublasLtMatrixLayoutOpaque_t* a,
                                 const cublasLtMatrixLayoutOpaque_t* b, const cublasLtMatrixLayoutOpaque_t* c,
                                 const cublasLtMatrixLayoutOpaque_t* d, Gemm* g) {
  if (!desc || !a || !b || !c || !d || !(*d == *c)) return CUBLAS_STATUS_INVALID_VALUE;
  const std::optional<Arith> arith = arith_of(c->type, desc->compute);
  if (!arith || a->type != c->type || b->type != c->type || desc->scale != arith->scale)
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const bool ta = transposes(desc->trans_a), tb = transposes(desc->trans_b);
  const int64_t m = int64_t(c->rows), n = int64_t(c->cols), k = int64_t(ta ? a->rows : a->cols);
  const bool agree = int64_t(ta ? a->cols : a->rows) == m && int64_t(tb ? b->rows : b->cols) == n &&
                     int64_t(tb ? b->cols : b->rows) == k;
  const bool lds = ld_holds(a->ld, int64_t(a->rows)) && ld_holds(b->ld, int64_t(b->rows)) &&
                   ld_holds(c->ld, int64_t(c->rows));
  if (!agree || !lds || a->batch != c->batch || b->batch != c->batch) return CUBLAS_STATUS_INVALID_VALUE;
  *g = Gemm{.arith = *arith, .trans_a = ta, .trans_b = tb, .m = m, .n = n, .k = k, .a = nullptr, .lda = a->ld,
            .stride_a = a->stride, .b = nullptr, .ldb = b->ld, .stride_b = b->stride, .c = nullptr, .ldc = c->ld,
            .stride_c = c->stride, .batch = c->batch, .alpha = 0, .beta = 0};
  return CUBLAS_STATUS_SUCCESS;
}

// The heuristic's algorithm: a tag, the data type, whether TF32, and the alignments of A, B, C and D it needs.
constexpr uint64_t kAlgoTag = 0x75656d752d616c67;
inline cublasLtMatmulAlgo_t make_algo(const Arith& arith, const cublasLtMatmulPreferenceOpaque_t& pref) {
  const uint32_t* align = pref.min_alignment;
  return {{kAlgoTag, uint64_t(arith.type), uint64_t(arith.tf32), align[0], align[1], align[2], align[3], 0}};
}
inline uint64_t element_bytes(cudaDataType_t type) { return type == CUDA_R_64F ? 8 : type == CUDA_R_16BF ? 2 : 4; }
// Whether every matrix of a batch starting at p, `stride` elements apart, is `alignment`-byte aligned.
inline bool batch_aligned(const Gemm& g, const void* p, int64_t stride, uint64_t alignment) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p));
  if (g.batch > 1) bits |= uint64_t(stride) * element_bytes(g.arith.type);
  return alignment == 0 || bits % alignment == 0;
}
// Whether `algo` came from the heuristic for g's types, and g's matrices have the alignments it needs.
inline bool algo_fits(const cublasLtMatmulAlgo_t& algo, const Gemm& g) {
  const uint64_t* x = algo.data;
  return x[0] == kAlgoTag && x[1] == uint64_t(g.arith.type) && x[2] == uint64_t(g.arith.tf32) &&
         batch_aligned(g, g.a, g.stride_a, x[3]) && batch_aligned(g, g.b, g.stride_b, x[4]) &&
         batch_aligned(g, g.c, g.stride_c, x[5]) && batch_aligned(g, g.c, g.stride_c, x[6]);
}

}  // namespace uoe::cuda_emu

// ---- the API ----------------------------------------------------------------------------------------------------

inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasLtContext();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
inline const char* cublasLtGetStatusName(cublasStatus_t status) { return cublasGetStatusName(status); }
inline const char* cublasLtGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "the operation completed successfully";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "a resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an invalid value was used as an argument";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the device lacks a feature the operation requires";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the GPU program failed to execute";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
  }
  return "unknown status";
}

inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc, cublasComputeType_t computeType,
                                               cudaDataType_t scaleType) {
  if (!desc) return CUBLAS_STATUS_INVALID_VALUE;
  *desc = new cublasLtMatmulDescOpaque_t{computeType, scaleType};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc) {
  delete desc;
  return CUBLAS_STATUS_SUCCESS;
}
// TRANSA and TRANSB (int32_t, a cublasOperation_t); any other attribute is CUBLAS_STATUS_INVALID_VALUE.
inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
                                                     const void* buf, size_t sizeInBytes) {
  using namespace uoe::cuda_emu;
  if (!desc || (attr != CUBLASLT_MATMUL_DESC_TRANSA && attr != CUBLASLT_MATMUL_DESC_TRANSB))
    return CUBLAS_STATUS_INVALID_VALUE;
  int32_t op = 0;
  if (attribute_value(buf, sizeInBytes, &op) != CUBLAS_STATUS_SUCCESS ||
      !(op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C))
    return CUBLAS_STATUS_INVALID_VALUE;
  (attr == CUBLASLT_MATMUL_DESC_TRANSA ? desc->trans_a : desc->trans_b) = cublasOperation_t(op);
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType_t type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  *layout = new cublasLtMatrixLayoutOpaque_t{type, rows, cols, ld};
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout) {
  delete layout;
  return CUBLAS_STATUS_SUCCESS;
}
// BATCH_COUNT (int32_t, at least 1) and STRIDED_BATCH_OFFSET (int64_t); any other attribute is
// CUBLAS_STATUS_INVALID_VALUE.
inline cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t layout,
                                                       cublasLtMatrixLayoutAttribute_t attr, const void* buf,
                                                       size_t sizeInBytes) {
  using namespace uoe::cuda_emu;
  if (!layout) return CUBLAS_STATUS_INVALID_VALUE;
  if (attr == CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET) return attribute_value(buf, sizeInBytes, &layout->stride);
  int32_t count = 0;
  if (attr != CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT || attribute_value(buf, sizeInBytes, &count) != CUBLAS_STATUS_SUCCESS ||
      count < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  layout->batch = count;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref) {
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  *pref = new cublasLtMatmulPreferenceOpaque_t();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref) {
  delete pref;
  return CUBLAS_STATUS_SUCCESS;
}
// MAX_WORKSPACE_BYTES (uint64_t: any limit, the stand-in's algorithm needs no workspace) and MIN_ALIGNMENT_A/B/C/D_BYTES
// (uint32_t); any other attribute is CUBLAS_STATUS_INVALID_VALUE.
inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                           cublasLtMatmulPreferenceAttributes_t attr, const void* buf,
                                                           size_t sizeInBytes) {
  using namespace uoe::cuda_emu;
  if (!pref) return CUBLAS_STATUS_INVALID_VALUE;
  switch (attr) {
    case CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES: {
      uint64_t limit = 0;
      return attribute_value(buf, sizeInBytes, &limit);
    }
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES:
    case CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES:
      return attribute_value(buf, sizeInBytes, &pref->min_alignment[attr - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES]);
  }
  return CUBLAS_STATUS_INVALID_VALUE;
}

// One algorithm for any problem lt_problem accepts (its status otherwise): CUBLAS_STATUS_INVALID_VALUE also for a
// null argument or requestedAlgoCount < 1; CUBLAS_STATUS_NOT_SUPPORTED, with no result, under blas_no_heuristic.
inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t operationDesc,
                                                     cublasLtMatrixLayout_t Adesc, cublasLtMatrixLayout_t Bdesc,
                                                     cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
                                                     cublasLtMatmulPreference_t preference, int requestedAlgoCount,
                                                     cublasLtMatmulHeuristicResult_t heuristicResultsArray[],
                                                     int* returnAlgoCount) {
  using namespace uoe::cuda_emu;
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!preference || !heuristicResultsArray || !returnAlgoCount || requestedAlgoCount < 1)
    return CUBLAS_STATUS_INVALID_VALUE;
  Gemm g{};
  if (const cublasStatus_t s = lt_problem(operationDesc, Adesc, Bdesc, Cdesc, Ddesc, &g); s != CUBLAS_STATUS_SUCCESS)
    return s;
  *returnAlgoCount = 0;
  if (blas_no_heuristic.load()) return CUBLAS_STATUS_NOT_SUPPORTED;
  heuristicResultsArray[0] = {make_algo(g.arith, *preference), 0, CUBLAS_STATUS_SUCCESS, 1.0f, {}};
  *returnAlgoCount = 1;
  return CUBLAS_STATUS_SUCCESS;
}

// D = alpha op(A) op(B) + beta C, in place (D == C, Ddesc equal to Cdesc), queued on `stream`. Checks: those of
// lt_problem; CUBLAS_STATUS_INVALID_VALUE for a null alpha or beta, a null matrix the call would touch, D != C, or an
// algorithm the heuristic did not give for these types and alignments; with no algorithm (cuBLASLt then runs its
// heuristic), CUBLAS_STATUS_NOT_SUPPORTED under blas_no_heuristic. A batch whose C matrices overlap fails the
// running test. The workspace is not used.
inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t lightHandle, cublasLtMatmulDesc_t computeDesc, const void* alpha,
                                     const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                                     cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                                     cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                                     const cublasLtMatmulAlgo_t* algo, void* /*workspace*/,
                                     size_t /*workspaceSizeInBytes*/, cudaStream_t stream) {
  using namespace uoe::cuda_emu;
  if (!lightHandle) return CUBLAS_STATUS_NOT_INITIALIZED;
  Gemm g{};
  if (const cublasStatus_t s = lt_problem(computeDesc, Adesc, Bdesc, Cdesc, Ddesc, &g); s != CUBLAS_STATUS_SUCCESS)
    return s;
  if (!alpha || !beta || D != C) return CUBLAS_STATUS_INVALID_VALUE;
  g.a = A, g.b = B, g.c = D;
  g.alpha = scalar_at(alpha, g.arith.scale), g.beta = scalar_at(beta, g.arith.scale);
  if (null_operand(g) || (algo && !algo_fits(*algo, g))) return CUBLAS_STATUS_INVALID_VALUE;
  if (!algo && blas_no_heuristic.load()) return CUBLAS_STATUS_NOT_SUPPORTED;  // its own heuristic finds none
  check_batch_c(g, "cublasLtMatmul");
  enqueue(stream, [g] { run(g); });
  ++lt_matmul_calls;
  return CUBLAS_STATUS_SUCCESS;
}
