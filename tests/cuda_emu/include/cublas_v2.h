// A CPU stand-in for cuBLAS (cublas_v2.h) in tests/cuda_emu: the GEMMs the CUDA backend calls (strided batched,
// grouped), on the CPU, in stream order. Not an implementation of cuBLAS: the calls, types and status values are
// cuBLAS's, with the argument checks its documentation gives, so that the backend's host code runs unchanged.
//
// - Arguments are checked at the call, which returns the status; the arithmetic is queued on the handle's stream
//   (cublasSetStream) and runs when the host waits for it, reading the matrices (and a grouped call's pointer
//   arrays, device memory) then.
// - Column-major, as cuBLAS: C = alpha op(A) op(B) + beta C with op(A) m x k, op(B) k x n, C m x n. Each dot product
//   is summed in double, scaled by alpha, beta * C added (C not read when beta == 0), and the result rounded once
//   to C's type (bfloat16: to nearest even). CUBLAS_COMPUTE_32F_FAST_TF32 first rounds every float of A and B to
//   TF32 (10 explicit mantissa bits, to nearest even), so that a test sees whether TF32 was used.
// - Types: float (compute 32F or 32F_FAST_TF32, scale float), double (compute 64F, scale double), bfloat16
//   (compute 32F, scale float); others are CUBLAS_STATUS_NOT_SUPPORTED.
// - Test hooks and call counts in namespace uoe::cuda_emu (below).
#pragma once
#include <cuda_runtime.h>
#include <library_types.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;

typedef enum {
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_64F = 70,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;

typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;

struct cublasContext {
  cudaStream_t stream = nullptr;  // where the handle's calls queue their work (nullptr: the legacy default stream)
};
typedef struct cublasContext* cublasHandle_t;

namespace uoe::cuda_emu {

// Test hooks: grouped calls (all of them, or those with CUBLAS_COMPUTE_32F_FAST_TF32) answer
// CUBLAS_STATUS_NOT_SUPPORTED, as a cuBLAS or GPU without them would.
inline std::atomic<bool> blas_refuse_grouped{false};
inline std::atomic<bool> blas_refuse_grouped_tf32{false};
// Calls that returned CUBLAS_STATUS_SUCCESS, by function (the grouped count covers both grouped functions).
inline std::atomic<int> strided_batched_calls{0};
inline std::atomic<int> grouped_calls{0};

// ---- numbers ----------------------------------------------------------------------------------------------------

// x rounded to TF32 (10 explicit mantissa bits) to nearest even; infinities and NaN unchanged.
inline float round_to_tf32(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;
  u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
  return std::bit_cast<float>(u);
}

// x rounded once to bfloat16 (8 significant bits, float's exponent range) to nearest even: the bits. NaN stays NaN.
inline uint16_t round_to_bf16(double x) {
  if (std::isnan(x)) return std::signbit(x) ? 0xffc0 : 0x7fc0;
  if (x != 0 && std::isfinite(x)) {
    const int exponent = std::max(std::ilogb(x), -126);  // below 2^-126, bfloat16's subnormals: one step for all
    const double step = std::ldexp(1.0, exponent - 7);
    x = std::nearbyint(x / step) * step;  // float(x) is then exact, or infinite past bfloat16's largest value
  }
  return uint16_t(std::bit_cast<uint32_t>(float(x)) >> 16);
}
inline double bf16_value(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

// The element types as stored: float, double, and bfloat16 as its bits.
inline double value_of(float x, bool tf32) { return tf32 ? round_to_tf32(x) : x; }
inline double value_of(double x, bool) { return x; }
inline double value_of(uint16_t bf16, bool) { return bf16_value(bf16); }
inline void store(float* p, double x) { *p = float(x); }
inline void store(double* p, double x) { *p = x; }
inline void store(uint16_t* p, double x) { *p = round_to_bf16(x); }

// ---- the arithmetic ---------------------------------------------------------------------------------------------

// The arithmetic of a supported (data type, compute type) pair, and the type of its alpha and beta.
struct Arith {
  cudaDataType_t type;
  bool tf32;
  cudaDataType_t scale;
};
inline std::optional<Arith> arith_of(cudaDataType_t type, cublasComputeType_t compute) {
  if (type == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F) return Arith{type, false, CUDA_R_32F};
  if (type == CUDA_R_32F && compute == CUBLAS_COMPUTE_32F_FAST_TF32) return Arith{type, true, CUDA_R_32F};
  if (type == CUDA_R_16BF && compute == CUBLAS_COMPUTE_32F) return Arith{type, false, CUDA_R_32F};
  if (type == CUDA_R_64F && compute == CUBLAS_COMPUTE_64F) return Arith{type, false, CUDA_R_64F};
  return std::nullopt;
}
inline double scalar_at(const void* p, cudaDataType_t scale) {
  return scale == CUDA_R_64F ? *static_cast<const double*>(p) : *static_cast<const float*>(p);
}

// A strided batch of column-major GEMMs: for b < batch, C_b = alpha op(A_b) op(B_b) + beta C_b, where X_b starts
// b * stride_x elements after X_0; op(A) m x k, op(B) k x n, C m x n.
struct Gemm {
  Arith arith;
  bool trans_a, trans_b;
  int64_t m, n, k;
  const void* a;
  int64_t lda, stride_a;
  const void* b;
  int64_t ldb, stride_b;
  void* c;
  int64_t ldc, stride_c;
  int64_t batch;
  double alpha, beta;
};

template <class S>
void run_one(const Gemm& g, const S* a, const S* b, S* c) {
  const bool tf32 = g.arith.tf32;
  const size_t m = size_t(g.m), n = size_t(g.n), k = size_t(g.k);
  // op(A) by rows and op(B) by columns, as doubles: every dot product reads two contiguous runs
  std::vector<double> rows(m * k), cols(n * k);
  for (size_t i = 0; i < m; ++i)
    for (size_t p = 0; p < k; ++p)
      rows[i * k + p] = value_of(g.trans_a ? a[p + i * size_t(g.lda)] : a[i + p * size_t(g.lda)], tf32);
  for (size_t j = 0; j < n; ++j)
    for (size_t p = 0; p < k; ++p)
      cols[j * k + p] = value_of(g.trans_b ? b[j + p * size_t(g.ldb)] : b[p + j * size_t(g.ldb)], tf32);
  for (size_t j = 0; j < n; ++j)
    for (size_t i = 0; i < m; ++i) {
      const double* x = rows.data() + i * k;
      const double* y = cols.data() + j * k;
      double sum[4] = {0, 0, 0, 0};  // four running sums, so that the products do not wait on one another
      size_t p = 0;
      for (; p + 4 <= k; p += 4)
        for (size_t l = 0; l < 4; ++l) sum[l] += x[p + l] * y[p + l];
      for (; p < k; ++p) sum[0] += x[p] * y[p];
      S& out = c[i + j * size_t(g.ldc)];
      store(&out, g.alpha * ((sum[0] + sum[1]) + (sum[2] + sum[3])) + (g.beta == 0 ? 0.0 : g.beta * value_of(out, false)));
    }
}
template <class S>
void run_typed(const Gemm& g) {
  const S* a = static_cast<const S*>(g.a);
  const S* b = static_cast<const S*>(g.b);
  S* c = static_cast<S*>(g.c);
  for (int64_t i = 0; i < g.batch; ++i) run_one(g, a + i * g.stride_a, b + i * g.stride_b, c + i * g.stride_c);
}
inline void run(const Gemm& g) {
  if (g.arith.type == CUDA_R_64F) return run_typed<double>(g);
  if (g.arith.type == CUDA_R_16BF) return run_typed<uint16_t>(g);
  run_typed<float>(g);
}

// ---- argument checks --------------------------------------------------------------------------------------------

inline bool valid_op(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }
// Whether op(X) is X's transpose: CUBLAS_OP_C is, for real data.
inline bool transposes(cublasOperation_t op) { return op != CUBLAS_OP_N; }
// A stored column-major matrix's leading dimension, as cuBLAS wants it: at least its rows, and at least 1.
inline bool ld_holds(int64_t ld, int64_t rows) { return ld >= std::max<int64_t>(1, rows); }

// cuBLAS's CUBLAS_STATUS_INVALID_VALUE cases for one GEMM's shape: an unknown operation, a negative size, or a
// leading dimension shorter than its stored matrix's rows (A is m x k stored, k x m when transposed; B k x n, n x k).
inline bool valid_shape(cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
                        int64_t lda, int64_t ldb, int64_t ldc) {
  return valid_op(transa) && valid_op(transb) && m >= 0 && n >= 0 && k >= 0 &&
         ld_holds(lda, transposes(transa) ? k : m) && ld_holds(ldb, transposes(transb) ? n : k) && ld_holds(ldc, m);
}

// The matrix a GEMM would touch through a null pointer ("A", "B" or "C"), or nullptr when none.
inline const char* null_operand(const Gemm& g) {
  if (g.batch == 0 || g.m == 0 || g.n == 0) return nullptr;
  if (g.k > 0 && !g.a) return "A";
  if (g.k > 0 && !g.b) return "B";
  return g.c ? nullptr : "C";
}

// Whether two matrices of the batch's C share an element: on a GPU, whose batch members run at once, a race. The
// elements of C_0 are i + j ldc (i < m, j < n), so C_0 and C_t meet when t stride_c = di + dj ldc with |di| < m and
// |dj| < n (ldc >= m: only the two dj nearest t stride_c / ldc can).
inline bool batch_c_overlaps(const Gemm& g) {
  if (g.m == 0 || g.n == 0) return false;
  for (int64_t t = 1; t < g.batch; ++t) {
    const int64_t d = t * std::abs(g.stride_c), dj = d / g.ldc;
    for (const int64_t j : {dj, dj + 1})
      if (j < g.n && std::abs(d - j * g.ldc) < g.m) return true;
  }
  return false;
}
// An overlapping C is not an error cuBLAS reports; here it fails the running test (fault()).
inline void check_batch_c(const Gemm& g, const char* call) {
  if (batch_c_overlaps(g))
    fault(std::string(call) + ": the batch's C matrices overlap (stride_c " + std::to_string(g.stride_c) +
          ", ldc " + std::to_string(g.ldc) + ", m " + std::to_string(g.m) + ", n " + std::to_string(g.n) +
          "), a race on a GPU");
}

// ---- grouped calls ----------------------------------------------------------------------------------------------

// One group of a grouped call: `size` problems of one shape, one alpha and one beta.
struct Group {
  bool trans_a, trans_b;
  int64_t m, n, k, lda, ldb, ldc, size;
  double alpha, beta;
};

// Runs the problems of `groups` in order, problem p's matrices at A[p], B[p], C[p] (read now: device memory).
template <class In, class Out>
void run_groups(const std::vector<Group>& groups, Arith arith, const In* A, const In* B, const Out* C) {
  int64_t p = 0;
  for (const Group& g : groups)
    for (int64_t i = 0; i < g.size; ++i, ++p) {
      const Gemm one{.arith = arith, .trans_a = g.trans_a, .trans_b = g.trans_b, .m = g.m, .n = g.n, .k = g.k,
                     .a = A[p], .lda = g.lda, .stride_a = 0, .b = B[p], .ldb = g.ldb, .stride_b = 0,
                     .c = C[p], .ldc = g.ldc, .stride_c = 0, .batch = 1, .alpha = g.alpha, .beta = g.beta};
      if (const char* name = null_operand(one))
        fault("grouped GEMM: problem " + std::to_string(p) + " has a null " + name);
      else
        run(one);
    }
}

// The grouped calls' shared body: checks (CUBLAS_STATUS_INVALID_VALUE), then the type (NOT_SUPPORTED when `arith`
// is empty, or a test hook refuses), then queues the problems on the handle's stream. In and Out: the pointer
// arrays' elements (const void* and void*, or typed).
template <class Scalar, class In, class Out>
cublasStatus_t grouped(cublasHandle_t handle, const cublasOperation_t* transa, const cublasOperation_t* transb,
                       const int64_t* m, const int64_t* n, const int64_t* k, const Scalar* alpha, const In* A,
                       const int64_t* lda, const In* B, const int64_t* ldb, const Scalar* beta, const Out* C,
                       const int64_t* ldc, int64_t group_count, const int64_t* group_size,
                       std::optional<Arith> arith) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (group_count < 0) return CUBLAS_STATUS_INVALID_VALUE;
  if (group_count > 0 && !(transa && transb && m && n && k && alpha && lda && ldb && beta && ldc && group_size))
    return CUBLAS_STATUS_INVALID_VALUE;
  int64_t problems = 0;
  for (int64_t i = 0; i < group_count; ++i) {
    if (!valid_shape(transa[i], transb[i], m[i], n[i], k[i], lda[i], ldb[i], ldc[i]) || group_size[i] < 0)
      return CUBLAS_STATUS_INVALID_VALUE;
    problems += group_size[i];
  }
  if (problems > 0 && !(A && B && C)) return CUBLAS_STATUS_INVALID_VALUE;
  if (!arith || blas_refuse_grouped.load() || (arith->tf32 && blas_refuse_grouped_tf32.load()))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  std::vector<Group> groups;
  for (int64_t i = 0; i < group_count; ++i)
    groups.push_back({transposes(transa[i]), transposes(transb[i]), m[i], n[i], k[i], lda[i], ldb[i], ldc[i],
                      group_size[i], double(alpha[i]), double(beta[i])});
  enqueue(handle->stream, [groups, arith = *arith, A, B, C] { run_groups(groups, arith, A, B, C); });
  ++grouped_calls;
  return CUBLAS_STATUS_SUCCESS;
}

// cublasGemmGroupedBatchedEx's types, as cuBLAS documents them: compute 32F for float and bfloat16 (and half,
// which this stand-in lacks), 32F_FAST_TF32 for float; A, B and C of one type.
inline std::optional<Arith> grouped_ex_arith(cudaDataType_t a, cudaDataType_t b, cudaDataType_t c,
                                             cublasComputeType_t compute) {
  if (a != b || a != c || compute == CUBLAS_COMPUTE_64F) return std::nullopt;
  return arith_of(a, compute);
}

}  // namespace uoe::cuda_emu

// ---- the API ----------------------------------------------------------------------------------------------------

inline cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (!handle) return CUBLAS_STATUS_INVALID_VALUE;
  *handle = new cublasContext();
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}

inline const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
  }
  return "CUBLAS_STATUS_UNKNOWN";
}

// Checks: INVALID_VALUE for the shape (see valid_shape), batchCount < 0, a null alpha or beta, or a null matrix the
// call would touch; NOT_SUPPORTED for other types or algorithms than the stand-in's. A batch whose C matrices
// overlap fails the running test.
inline cublasStatus_t cublasGemmStridedBatchedEx_64(
    cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int64_t m, int64_t n, int64_t k,
    const void* alpha, const void* A, cudaDataType_t Atype, int64_t lda, long long int strideA, const void* B,
    cudaDataType_t Btype, int64_t ldb, long long int strideB, const void* beta, void* C, cudaDataType_t Ctype,
    int64_t ldc, long long int strideC, int64_t batchCount, cublasComputeType_t computeType, cublasGemmAlgo_t algo) {
  using namespace uoe::cuda_emu;
  if (!handle) return CUBLAS_STATUS_NOT_INITIALIZED;
  if (!valid_shape(transa, transb, m, n, k, lda, ldb, ldc) || batchCount < 0 || !alpha || !beta)
    return CUBLAS_STATUS_INVALID_VALUE;
  const std::optional<Arith> arith = arith_of(Ctype, computeType);
  if (!arith || Atype != Ctype || Btype != Ctype || algo != CUBLAS_GEMM_DEFAULT) return CUBLAS_STATUS_NOT_SUPPORTED;
  const Gemm g{.arith = *arith, .trans_a = transposes(transa), .trans_b = transposes(transb), .m = m, .n = n,
               .k = k, .a = A, .lda = lda, .stride_a = strideA, .b = B, .ldb = ldb, .stride_b = strideB, .c = C,
               .ldc = ldc, .stride_c = strideC, .batch = batchCount, .alpha = scalar_at(alpha, arith->scale),
               .beta = scalar_at(beta, arith->scale)};
  if (null_operand(g)) return CUBLAS_STATUS_INVALID_VALUE;
  check_batch_c(g, "cublasGemmStridedBatchedEx_64");
  enqueue(handle->stream, [g] { run(g); });
  ++strided_batched_calls;
  return CUBLAS_STATUS_SUCCESS;
}

// Group i: group_size[i] problems with transa_array[i], ..., ldc_array[i], alpha_array[i] and beta_array[i] (host
// arrays, floats); the problems' matrices at Aarray[p], Barray[p], Carray[p] (device arrays), group after group.
// Checks: INVALID_VALUE for group_count < 0, a null host array, a group's shape (see valid_shape) or a negative
// group_size, null pointer arrays; NOT_SUPPORTED for other types than compute 32F with float or bfloat16 and
// 32F_FAST_TF32 with float, and when a test hook refuses.
inline cublasStatus_t cublasGemmGroupedBatchedEx_64(
    cublasHandle_t handle, const cublasOperation_t transa_array[], const cublasOperation_t transb_array[],
    const int64_t m_array[], const int64_t n_array[], const int64_t k_array[], const void* alpha_array,
    const void* const Aarray[], cudaDataType_t Atype, const int64_t lda_array[], const void* const Barray[],
    cudaDataType_t Btype, const int64_t ldb_array[], const void* beta_array, void* const Carray[],
    cudaDataType_t Ctype, const int64_t ldc_array[], int64_t group_count, const int64_t group_size[],
    cublasComputeType_t computeType) {
  using namespace uoe::cuda_emu;
  return grouped(handle, transa_array, transb_array, m_array, n_array, k_array,
                 static_cast<const float*>(alpha_array), Aarray, lda_array, Barray, ldb_array,
                 static_cast<const float*>(beta_array), Carray, ldc_array, group_count, group_size,
                 grouped_ex_arith(Atype, Btype, Ctype, computeType));
}

// cublasGemmGroupedBatchedEx_64's checks, for double.
inline cublasStatus_t cublasDgemmGroupedBatched_64(
    cublasHandle_t handle, const cublasOperation_t transa_array[], const cublasOperation_t transb_array[],
    const int64_t m_array[], const int64_t n_array[], const int64_t k_array[], const double alpha_array[],
    const double* const Aarray[], const int64_t lda_array[], const double* const Barray[], const int64_t ldb_array[],
    const double beta_array[], double* const Carray[], const int64_t ldc_array[], int64_t group_count,
    const int64_t group_size[]) {
  using namespace uoe::cuda_emu;
  return grouped(handle, transa_array, transb_array, m_array, n_array, k_array, alpha_array, Aarray, lda_array,
                 Barray, ldb_array, beta_array, Carray, ldc_array, group_count, group_size,
                 arith_of(CUDA_R_64F, CUBLAS_COMPUTE_64F));
}
