// The CPU stand-ins for cuBLAS and cuBLASLt (tests/cuda_emu/include/cublas_v2.h, cublasLt.h) against a naive
// column-major loop written here: every transpose pair, leading dimensions past the rows, strided batches with gaps,
// float, double, bfloat16 and TF32, alpha and beta (beta == 0 over a NaN C), grouped calls of several groups, the
// empty problems, each invalid argument's status, stream order, and the test hooks. Every result must be the
// nearest value of its type to the loop's (double) result; everything else in C must keep its bytes.
#include <cublasLt.h>
#include <cublas_v2.h>
#include <gtest/gtest-spi.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda_emu {
namespace {

using Bf16 = uint16_t;  // bfloat16 as its bits, as the stand-in stores CUDA_R_16BF
template <class S>
using Scale = std::conditional_t<std::is_same_v<S, double>, double, float>;  // alpha and beta

template <class S>
cudaDataType_t type_of() {
  if constexpr (std::is_same_v<S, double>) return CUDA_R_64F;
  else if constexpr (std::is_same_v<S, Bf16>) return CUDA_R_16BF;
  else return CUDA_R_32F;
}
template <class S>
cublasComputeType_t compute_of() {
  return std::is_same_v<S, double> ? CUBLAS_COMPUTE_64F : CUBLAS_COMPUTE_32F;
}
template <class S>
double value(S x) {
  if constexpr (std::is_same_v<S, Bf16>) return std::bit_cast<float>(uint32_t(x) << 16);
  else return double(x);
}
template <class S>
S nan_of() {
  if constexpr (std::is_same_v<S, Bf16>) return 0x7fc0;
  else return std::numeric_limits<S>::quiet_NaN();
}
// A random value of S, never zero: magnitude in [0.25, 1), either sign (bfloat16: the float's top 16 bits).
template <class S>
S random_value(std::mt19937& rng) {
  const double x = (rng() & 1 ? -1.0 : 1.0) * std::uniform_real_distribution<double>(0.25, 1.0)(rng);
  if constexpr (std::is_same_v<S, Bf16>) return Bf16(std::bit_cast<uint32_t>(float(x)) >> 16);
  else return S(x);
}
// x to 11 significant bits (TF32) to nearest even, by scaling: another route than the stand-in's bit arithmetic.
double tf32(double x) {
  int e = 0;
  (void)std::frexp(x, &e);
  const double step = std::ldexp(1.0, e - 11);
  return std::nearbyint(x / step) * step;
}

// Whether x is a value of S nearest to `exact` (neither neighbour of x is nearer); double: within 1e-13.
bool nearest(float x, double exact) {
  const double d = std::abs(x - exact);
  return d <= std::abs(std::nextafter(x, INFINITY) - exact) && d <= std::abs(std::nextafter(x, -INFINITY) - exact);
}
bool nearest(Bf16 x, double exact) {
  const double d = std::abs(value(x) - exact);
  return d <= std::abs(value(Bf16(x + 1)) - exact) && d <= std::abs(value(Bf16(x - 1)) - exact);
}
bool nearest(double x, double exact) { return std::abs(x - exact) <= 1e-13 * std::max(1.0, std::abs(exact)); }

cublasOperation_t op(bool transposed) { return transposed ? CUBLAS_OP_T : CUBLAS_OP_N; }

// One strided-batch problem in cuBLAS's column-major terms: op(A) m x k, op(B) k x n, C m x n.
struct Problem {
  bool ta = false, tb = false;
  int64_t m = 1, n = 1, k = 1;
  int64_t pad = 0;    // each leading dimension: the stored rows + pad
  int64_t batch = 1;  // matrices `gap` elements apart (past the end of the one before)
  int64_t gap = 0;
  double alpha = 1, beta = 0;  // beta == 0: C starts as NaN
};

// A strided batch of column-major rows x cols matrices, every element set (the padding and gaps too).
template <class S>
struct Stored {
  int64_t rows, cols, ld, stride;
  size_t size;
  Guarded<S> data;
  Stored(int64_t rows, int64_t cols, const Problem& p)
      : rows(rows), cols(cols), ld(std::max<int64_t>(rows + p.pad, 1)), stride(ld * cols + p.gap),
        size(size_t(stride * (std::max<int64_t>(p.batch, 1) - 1) + ld * cols)), data(size) {}
  S* p() { return data.p(); }
  S at(int64_t b, int64_t i, int64_t j) const { return data.p()[b * stride + i + j * ld]; }
};

template <class S>
struct Operands {
  Operands(const Problem& p, std::mt19937& rng)
      : a(p.ta ? p.k : p.m, p.ta ? p.m : p.k, p), b(p.tb ? p.n : p.k, p.tb ? p.k : p.n, p), c(p.m, p.n, p) {
    for (size_t i = 0; i < a.size; ++i) a.p()[i] = random_value<S>(rng);
    for (size_t i = 0; i < b.size; ++i) b.p()[i] = random_value<S>(rng);
    for (size_t i = 0; i < c.size; ++i) c.p()[i] = p.beta == 0 ? nan_of<S>() : random_value<S>(rng);
    c0.assign(c.p(), c.p() + c.size);
  }
  Stored<S> a, b, c;
  std::vector<S> c0;  // C as the call found it
};

// C after the call by the definition, at the elements of the batch's m x n matrices (NaN elsewhere), in double; A
// and B rounded to TF32 when asked.
template <class S>
std::vector<double> expected(const Problem& p, const Operands<S>& o, bool tf32_inputs) {
  auto in = [&](S x) { return tf32_inputs ? tf32(value(x)) : value(x); };
  std::vector<double> want(o.c.size, NAN);
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t j = 0; j < p.n; ++j)
      for (int64_t i = 0; i < p.m; ++i) {
        double sum = 0;
        for (int64_t q = 0; q < p.k; ++q)
          sum += in(p.ta ? o.a.at(b, q, i) : o.a.at(b, i, q)) * in(p.tb ? o.b.at(b, j, q) : o.b.at(b, q, j));
        const size_t at = size_t(b * o.c.stride + i + j * o.c.ld);
        want[at] = p.alpha * sum + (p.beta == 0 ? 0.0 : p.beta * value(o.c0[at]));
      }
  return want;
}

// C's results are the nearest values to `want`; the rest of C kept its bytes; nothing past C's end was written.
template <class S>
void expect_c(Operands<S>& o, const std::vector<double>& want, const std::string& what) {
  int bad = 0;
  size_t first = 0;
  for (size_t i = 0; i < o.c.size; ++i) {
    const S got = o.c.p()[i];
    const bool ok = std::isnan(want[i]) ? std::memcmp(&got, &o.c0[i], sizeof(S)) == 0 : nearest(got, want[i]);
    if (!ok && bad++ == 0) first = i;
  }
  EXPECT_EQ(bad, 0) << what << ": first wrong element " << first << " is " << value(o.c.p()[first]) << ", want "
                    << want[first] << " (NaN: untouched)";
  EXPECT_TRUE(o.c.data.guard_intact()) << what;
}
template <class S>
bool c_untouched(Operands<S>& o) {
  return (o.c.size == 0 || std::memcmp(o.c.p(), o.c0.data(), o.c.size * sizeof(S)) == 0) && o.c.data.guard_intact();
}

struct Handles {
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t lt = nullptr;
  Handles() {
    EXPECT_EQ(cublasCreate(&blas), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtCreate(&lt), CUBLAS_STATUS_SUCCESS);
  }
  ~Handles() {
    (void)cublasDestroy(blas);
    (void)cublasLtDestroy(lt);
  }
};

// Sets a test hook for a scope.
struct Hook {
  std::atomic<bool>& flag;
  explicit Hook(std::atomic<bool>& f) : flag(f) { flag = true; }
  ~Hook() { flag = false; }
};

void synchronize() { ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess); }

// ---- the two strided routes -------------------------------------------------------------------------------------

template <class S>
cublasStatus_t strided(cublasHandle_t h, const Problem& p, Operands<S>& o, cublasComputeType_t compute) {
  const Scale<S> alpha = Scale<S>(p.alpha), beta = Scale<S>(p.beta);
  const cudaDataType_t t = type_of<S>();
  return cublasGemmStridedBatchedEx_64(h, op(p.ta), op(p.tb), p.m, p.n, p.k, &alpha, o.a.p(), t, o.a.ld,
                                       o.a.stride, o.b.p(), t, o.b.ld, o.b.stride, &beta, o.c.p(), t, o.c.ld,
                                       o.c.stride, p.batch, compute, CUBLAS_GEMM_DEFAULT);
}

// A layout of `batch` rows x cols matrices of `type`, `stride` elements apart.
cublasLtMatrixLayout_t layout(cudaDataType_t type, uint64_t rows, uint64_t cols, int64_t ld, int32_t batch,
                              int64_t stride) {
  cublasLtMatrixLayout_t l = nullptr;
  EXPECT_EQ(cublasLtMatrixLayoutCreate(&l, type, rows, cols, ld), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch, sizeof batch),
            CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof stride),
            CUBLAS_STATUS_SUCCESS);
  return l;
}

template <class S>
cublasLtMatrixLayout_t layout_of(const Stored<S>& x, int64_t batch) {
  return layout(type_of<S>(), uint64_t(x.rows), uint64_t(x.cols), x.ld, int32_t(std::max<int64_t>(batch, 1)),
                x.stride);
}

// The largest power of two, at most 256, dividing the address (bytes) of every matrix of x's batch.
template <class S>
uint32_t alignment_of(const Stored<S>& x, int64_t batch) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(x.data.p()));
  if (batch > 1) bits |= uint64_t(x.stride) * sizeof(S);
  uint32_t a = 256;
  while (bits % a != 0) a /= 2;
  return a;
}

// A problem's cuBLASLt descriptors (the preference telling the operands' alignments), destroyed with it.
struct LtDescs {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  template <class S>
  LtDescs(const Problem& p, const Operands<S>& o, cublasComputeType_t compute, cudaDataType_t scale)
      : a(layout_of(o.a, p.batch)), b(layout_of(o.b, p.batch)), c(layout_of(o.c, p.batch)) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, compute, scale), CUBLAS_STATUS_SUCCESS);
    set(CUBLASLT_MATMUL_DESC_TRANSA, op(p.ta));
    set(CUBLASLT_MATMUL_DESC_TRANSB, op(p.tb));
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&pref), CUBLAS_STATUS_SUCCESS);
    const uint32_t align_c = alignment_of(o.c, p.batch);
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, alignment_of(o.a, p.batch));
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, alignment_of(o.b, p.batch));
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, align_c);
    prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, align_c);
  }
  ~LtDescs() {
    (void)cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t l : {a, b, c}) (void)cublasLtMatrixLayoutDestroy(l);
    (void)cublasLtMatmulPreferenceDestroy(pref);
  }
  LtDescs(const LtDescs&) = delete;
  LtDescs& operator=(const LtDescs&) = delete;
  void set(cublasLtMatmulDescAttributes_t attr, cublasOperation_t value) {
    const int32_t v = value;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, attr, &v, sizeof v), CUBLAS_STATUS_SUCCESS);
  }
  void prefer(cublasLtMatmulPreferenceAttributes_t attr, uint32_t bytes) const {
    EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof bytes), CUBLAS_STATUS_SUCCESS);
  }
  // The heuristic's algorithm (its status when it has none).
  cublasStatus_t algo(cublasLtHandle_t h, cublasLtMatmulAlgo_t* out) const {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t s = cublasLtMatmulAlgoGetHeuristic(h, desc, a, b, c, c, pref, 1, &result, &found);
    if (s == CUBLAS_STATUS_SUCCESS) {
      EXPECT_EQ(found, 1);
      EXPECT_EQ(result.workspaceSize, 0u);
      *out = result.algo;
    }
    return s;
  }
};

template <class S>
cublasStatus_t lt_matmul(cublasLtHandle_t h, const Problem& p, Operands<S>& o, cublasComputeType_t compute,
                         cudaStream_t stream = nullptr) {
  const LtDescs d(p, o, compute, type_of<Scale<S>>());
  cublasLtMatmulAlgo_t algo{};
  if (const cublasStatus_t s = d.algo(h, &algo); s != CUBLAS_STATUS_SUCCESS) return s;
  const Scale<S> alpha = Scale<S>(p.alpha), beta = Scale<S>(p.beta);
  return cublasLtMatmul(h, d.desc, &alpha, o.a.p(), d.a, o.b.p(), d.b, &beta, o.c.p(), d.c, o.c.p(), d.c, &algo,
                        nullptr, 0, stream);
}

enum class Route { strided, lt };

// Every transpose pair, alpha and beta (0 over NaN, and not), a batch of 3 with padding and gaps, by `route`.
template <class S>
void check_every_transpose(Route route, cublasComputeType_t compute, bool tf32_inputs) {
  Handles hs;
  std::mt19937 rng(17);
  for (int t = 0; t < 4; ++t)
    for (const auto& [alpha, beta] : {std::pair{1.5, 0.0}, std::pair{-0.75, 1.25}}) {
      const Problem p{.ta = bool(t & 1), .tb = bool(t & 2), .m = 5, .n = 4, .k = 7, .pad = 3, .batch = 3,
                      .gap = 2, .alpha = alpha, .beta = beta};
      Operands<S> o(p, rng);
      const cublasStatus_t s = route == Route::lt ? lt_matmul(hs.lt, p, o, compute) : strided(hs.blas, p, o, compute);
      ASSERT_EQ(s, CUBLAS_STATUS_SUCCESS);
      synchronize();
      expect_c(o, expected(p, o, tf32_inputs),
               "ta " + std::to_string(p.ta) + " tb " + std::to_string(p.tb) + " beta " + std::to_string(beta));
    }
}

TEST(CublasEmulated, StridedBatchedIsTheNaiveLoopForEveryTransposeAndType) {
  const int calls = strided_batched_calls.load();
  check_every_transpose<float>(Route::strided, CUBLAS_COMPUTE_32F, false);
  check_every_transpose<double>(Route::strided, CUBLAS_COMPUTE_64F, false);
  check_every_transpose<Bf16>(Route::strided, CUBLAS_COMPUTE_32F, false);
  check_every_transpose<float>(Route::strided, CUBLAS_COMPUTE_32F_FAST_TF32, true);
  EXPECT_EQ(strided_batched_calls.load(), calls + 4 * 8);
}

TEST(CublasLtEmulated, MatmulIsTheNaiveLoopForEveryTransposeAndType) {
  const int calls = lt_matmul_calls.load();
  check_every_transpose<float>(Route::lt, CUBLAS_COMPUTE_32F, false);
  check_every_transpose<double>(Route::lt, CUBLAS_COMPUTE_64F, false);
  check_every_transpose<Bf16>(Route::lt, CUBLAS_COMPUTE_32F, false);
  check_every_transpose<float>(Route::lt, CUBLAS_COMPUTE_32F_FAST_TF32, true);
  EXPECT_EQ(lt_matmul_calls.load(), calls + 4 * 8);
}

// ---- rounding -----------------------------------------------------------------------------------------------------

// A 1 x 1 x k float product by `route`, with compute type `compute`.
float dot(Route route, const std::vector<float>& a, const std::vector<float>& b, cublasComputeType_t compute) {
  Handles hs;
  std::mt19937 rng(3);
  const Problem p{.ta = true, .k = int64_t(a.size())};  // A stored k x 1, B k x 1
  Operands<float> o(p, rng);
  std::copy(a.begin(), a.end(), o.a.p());
  std::copy(b.begin(), b.end(), o.b.p());
  EXPECT_EQ(route == Route::lt ? lt_matmul(hs.lt, p, o, compute) : strided(hs.blas, p, o, compute),
            CUBLAS_STATUS_SUCCESS);
  synchronize();
  return o.c.p()[0];
}

TEST(CublasEmulated, FastTf32RoundsEveryInputToTenMantissaBits) {
  const float up = 1 + 0x1p-12f;  // below half a TF32 step (2^-10) above 1: 1
  const float tie_even = 1 + 0x1p-11f, tie_odd = 1 + 3 * 0x1p-11f;  // halfway: to the even neighbour
  for (Route route : {Route::strided, Route::lt}) {
    EXPECT_EQ(dot(route, {up}, {1}, CUBLAS_COMPUTE_32F), up);
    EXPECT_EQ(dot(route, {up}, {1}, CUBLAS_COMPUTE_32F_FAST_TF32), 1.0f);
    EXPECT_EQ(dot(route, {1}, {tie_even}, CUBLAS_COMPUTE_32F_FAST_TF32), 1.0f);
    EXPECT_EQ(dot(route, {1}, {tie_odd}, CUBLAS_COMPUTE_32F_FAST_TF32), 1 + 0x1p-9f);
    EXPECT_EQ(dot(route, {up, -1}, {1, 1}, CUBLAS_COMPUTE_32F_FAST_TF32), 0.0f);  // both rounded before the sum
  }
  // Random floats: most results differ from the exact float ones (TF32 shows), all are the TF32 loop's.
  Handles hs;
  std::mt19937 rng(5);
  const Problem p{.m = 6, .n = 5, .k = 9, .pad = 1, .alpha = 1.25};
  Operands<float> o(p, rng);
  ASSERT_EQ(strided(hs.blas, p, o, CUBLAS_COMPUTE_32F_FAST_TF32), CUBLAS_STATUS_SUCCESS);
  synchronize();
  expect_c(o, expected(p, o, true), "TF32");
  const std::vector<double> exact = expected(p, o, false);
  int differ = 0;
  for (size_t i = 0; i < exact.size(); ++i) differ += !std::isnan(exact[i]) && !nearest(o.c.p()[i], exact[i]);
  EXPECT_GT(differ, 25);
}

TEST(CublasEmulated, Bfloat16ResultsAreRoundedOnceToNearestEven) {
  Handles hs;
  std::mt19937 rng(7);
  const Problem p{.ta = true, .k = 3};
  Operands<Bf16> o(p, rng);
  // 1 + 2^-8 + 2^-30: above the tie between bfloat16's 1 and 1 + 2^-7, so 1 + 2^-7; rounded to float first, the
  // 2^-30 is lost and the tie goes to even, 1.
  const Bf16 one = 0x3f80, a[3] = {one, 0x3b80 /* 2^-8 */, 0x3080 /* 2^-30 */};
  std::copy(a, a + 3, o.a.p());
  std::fill(o.b.p(), o.b.p() + 3, one);
  ASSERT_EQ(strided(hs.blas, p, o, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_SUCCESS);
  synchronize();
  EXPECT_EQ(o.c.p()[0], 0x3f81);
  // A NaN input gives NaN.
  o.a.p()[1] = nan_of<Bf16>();
  ASSERT_EQ(strided(hs.blas, p, o, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_SUCCESS);
  synchronize();
  EXPECT_TRUE(std::isnan(value(o.c.p()[0])));
}

// ---- empty problems -----------------------------------------------------------------------------------------------

TEST(CublasEmulated, EmptyProblemsWriteNothingAndKZeroScalesC) {
  Handles hs;
  std::mt19937 rng(11);
  for (const Problem& p : {Problem{.m = 0, .n = 3, .k = 2, .beta = 0.5}, Problem{.m = 3, .n = 0, .k = 2, .beta = 0.5},
                           Problem{.m = 3, .n = 2, .k = 2, .batch = 0, .beta = 0.5}}) {
    Operands<float> o(p, rng);
    ASSERT_EQ(strided(hs.blas, p, o, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_SUCCESS);
    synchronize();
    EXPECT_TRUE(c_untouched(o));
  }
  for (const double beta : {0.0, -1.5}) {  // K == 0: C = beta C (beta == 0 over NaN: zeros); A and B may be null
    const Problem p{.m = 4, .n = 3, .k = 0, .pad = 1, .batch = 2, .alpha = 2, .beta = beta};
    Operands<float> o(p, rng);
    const float alpha = 2, b = float(beta);
    ASSERT_EQ(cublasGemmStridedBatchedEx_64(hs.blas, CUBLAS_OP_N, CUBLAS_OP_N, 4, 3, 0, &alpha, nullptr, CUDA_R_32F,
                                            4, 0, nullptr, CUDA_R_32F, 1, 0, &b, o.c.p(), CUDA_R_32F, o.c.ld,
                                            o.c.stride, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
    synchronize();
    expect_c(o, expected(p, o, false), "K == 0, beta " + std::to_string(beta));
  }
}

// ---- grouped calls ------------------------------------------------------------------------------------------------

// Four groups, one per transpose pair, of 2, 1, 3 and 2 problems (batch 1 each) of different shapes, padding,
// alpha and beta.
std::vector<std::pair<Problem, int64_t>> groups() {
  return {{{.m = 4, .n = 3, .k = 5, .alpha = 1, .beta = 0}, 2},
          {{.ta = true, .m = 6, .n = 2, .k = 3, .pad = 2, .alpha = -0.5, .beta = 1.25}, 1},
          {{.ta = true, .tb = true, .m = 2, .n = 5, .k = 4, .pad = 1, .alpha = 2, .beta = -1}, 3},
          {{.tb = true, .m = 3, .n = 3, .k = 2, .pad = 1, .alpha = 0.75, .beta = 0.5}, 2}};
}

// The arrays of a grouped call over `operands` (one per problem, group after group).
template <class S>
struct GroupedArrays {
  std::vector<cublasOperation_t> ta, tb;
  std::vector<int64_t> m, n, k, lda, ldb, ldc, size;
  std::vector<Scale<S>> alpha, beta;
  std::vector<const S*> a, b;
  std::vector<S*> c;
  GroupedArrays(const std::vector<std::pair<Problem, int64_t>>& gs, std::vector<Operands<S>>& operands) {
    size_t i = 0;
    for (const auto& [p, count] : gs) {
      ta.push_back(op(p.ta)), tb.push_back(op(p.tb));
      m.push_back(p.m), n.push_back(p.n), k.push_back(p.k), size.push_back(count);
      lda.push_back(operands[i].a.ld), ldb.push_back(operands[i].b.ld), ldc.push_back(operands[i].c.ld);
      alpha.push_back(Scale<S>(p.alpha)), beta.push_back(Scale<S>(p.beta));
      for (int64_t j = 0; j < count; ++j, ++i)
        a.push_back(operands[i].a.p()), b.push_back(operands[i].b.p()), c.push_back(operands[i].c.p());
    }
  }
  // cublasDgemmGroupedBatched_64 for double, cublasGemmGroupedBatchedEx_64 otherwise.
  cublasStatus_t call(cublasHandle_t h, cublasComputeType_t compute) const {
    const int64_t count = int64_t(size.size());
    if constexpr (std::is_same_v<S, double>)
      return cublasDgemmGroupedBatched_64(h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(),
                                          a.data(), lda.data(), b.data(), ldb.data(), beta.data(), c.data(),
                                          ldc.data(), count, size.data());
    else
      return cublasGemmGroupedBatchedEx_64(
          h, ta.data(), tb.data(), m.data(), n.data(), k.data(), alpha.data(),
          reinterpret_cast<const void* const*>(a.data()), type_of<S>(), lda.data(),
          reinterpret_cast<const void* const*>(b.data()), type_of<S>(), ldb.data(), beta.data(),
          reinterpret_cast<void* const*>(c.data()), type_of<S>(), ldc.data(), count, size.data(), compute);
  }
};

template <class S>
std::vector<Operands<S>> grouped_operands(const std::vector<std::pair<Problem, int64_t>>& gs, std::mt19937& rng) {
  std::vector<Operands<S>> operands;
  for (const auto& [p, count] : gs)
    for (int64_t j = 0; j < count; ++j) operands.emplace_back(p, rng);
  return operands;
}

template <class S>
void check_grouped(cublasComputeType_t compute, bool tf32_inputs) {
  Handles hs;
  std::mt19937 rng(23);
  const auto gs = groups();
  std::vector<Operands<S>> operands = grouped_operands<S>(gs, rng);
  const GroupedArrays<S> arrays(gs, operands);  // the pointer arrays are read when the work runs: kept till then
  const int calls = grouped_calls.load();
  ASSERT_EQ(arrays.call(hs.blas, compute), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(grouped_calls.load(), calls + 1);
  synchronize();
  size_t i = 0;
  for (size_t g = 0; g < gs.size(); ++g)
    for (int64_t j = 0; j < gs[g].second; ++j, ++i)
      expect_c(operands[i], expected(gs[g].first, operands[i], tf32_inputs),
               "group " + std::to_string(g) + " problem " + std::to_string(i));
}

TEST(CublasEmulated, GroupedCallsAreTheNaiveLoopForEveryGroup) {
  check_grouped<float>(CUBLAS_COMPUTE_32F, false);
  check_grouped<float>(CUBLAS_COMPUTE_32F_FAST_TF32, true);
  check_grouped<Bf16>(CUBLAS_COMPUTE_32F, false);
  check_grouped<double>(CUBLAS_COMPUTE_64F, false);  // cublasDgemmGroupedBatched_64
}

// ---- invalid arguments --------------------------------------------------------------------------------------------

// Each case: what it changes in a valid call, and the status it must get; the valid call itself must succeed.
template <class Args>
struct Case {
  const char* what;
  std::function<void(Args&)> change;
  cublasStatus_t status;
};

// A valid cublasGemmStridedBatchedEx_64 call: 2 x (3 x 4) (4 x 2), column-major, packed.
struct StridedArgs {
  cublasHandle_t h;
  cublasOperation_t ta = CUBLAS_OP_N, tb = CUBLAS_OP_N;
  int64_t m = 3, n = 2, k = 4;
  const void* alpha;
  const void* a;
  cudaDataType_t at = CUDA_R_32F;
  int64_t lda = 3;
  long long stride_a = 12;
  const void* b;
  cudaDataType_t bt = CUDA_R_32F;
  int64_t ldb = 4;
  long long stride_b = 8;
  const void* beta;
  void* c;
  cudaDataType_t ct = CUDA_R_32F;
  int64_t ldc = 3;
  long long stride_c = 6;
  int64_t batch = 2;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  cublasGemmAlgo_t algo = CUBLAS_GEMM_DEFAULT;
  cublasStatus_t call() const {
    return cublasGemmStridedBatchedEx_64(h, ta, tb, m, n, k, alpha, a, at, lda, stride_a, b, bt, ldb, stride_b, beta,
                                         c, ct, ldc, stride_c, batch, compute, algo);
  }
};

TEST(CublasEmulated, StridedBatchedRejectsEachInvalidArgument) {
  Handles hs;
  std::mt19937 rng(29);
  const Problem p{.m = 3, .n = 2, .k = 4, .batch = 2, .beta = 0.5};
  Operands<float> o(p, rng);
  const float one = 1;
  const StridedArgs valid{.h = hs.blas, .alpha = &one, .a = o.a.p(), .b = o.b.p(), .beta = &one, .c = o.c.p()};
  const cublasStatus_t invalid = CUBLAS_STATUS_INVALID_VALUE, unsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  const std::vector<Case<StridedArgs>> cases = {
      {"no handle", [](StridedArgs& x) { x.h = nullptr; }, CUBLAS_STATUS_NOT_INITIALIZED},
      {"m < 0", [](StridedArgs& x) { x.m = -1; }, invalid},
      {"n < 0", [](StridedArgs& x) { x.n = -1; }, invalid},
      {"k < 0", [](StridedArgs& x) { x.k = -1; }, invalid},
      {"batch < 0", [](StridedArgs& x) { x.batch = -1; }, invalid},
      {"unknown transa", [](StridedArgs& x) { x.ta = cublasOperation_t(3); }, invalid},
      {"unknown transb", [](StridedArgs& x) { x.tb = cublasOperation_t(3); }, invalid},
      {"lda < m (A not transposed)", [](StridedArgs& x) { x.lda = 2; }, invalid},
      {"lda < k (A transposed)", [](StridedArgs& x) { x.ta = CUBLAS_OP_T, x.lda = 3; }, invalid},
      {"ldb < k (B not transposed)", [](StridedArgs& x) { x.ldb = 3; }, invalid},
      {"ldb < n (B transposed)", [](StridedArgs& x) { x.tb = CUBLAS_OP_T, x.ldb = 1; }, invalid},
      {"ldc < m", [](StridedArgs& x) { x.ldc = 2; }, invalid},
      {"ldc == 0 with m == 0", [](StridedArgs& x) { x.m = 0, x.lda = 1, x.ldc = 0; }, invalid},
      {"null alpha", [](StridedArgs& x) { x.alpha = nullptr; }, invalid},
      {"null beta", [](StridedArgs& x) { x.beta = nullptr; }, invalid},
      {"null A", [](StridedArgs& x) { x.a = nullptr; }, invalid},
      {"null B", [](StridedArgs& x) { x.b = nullptr; }, invalid},
      {"null C", [](StridedArgs& x) { x.c = nullptr; }, invalid},
      {"A of another type", [](StridedArgs& x) { x.at = CUDA_R_16BF; }, unsupported},
      {"half", [](StridedArgs& x) { x.at = x.bt = x.ct = CUDA_R_16F; }, unsupported},
      {"float with compute 64F", [](StridedArgs& x) { x.compute = CUBLAS_COMPUTE_64F; }, unsupported},
      {"bfloat16 with TF32", [](StridedArgs& x) { x.at = x.bt = x.ct = CUDA_R_16BF, x.compute = CUBLAS_COMPUTE_32F_FAST_TF32; },
       unsupported},
      {"double with compute 32F", [](StridedArgs& x) { x.at = x.bt = x.ct = CUDA_R_64F; }, unsupported},
      {"another algorithm", [](StridedArgs& x) { x.algo = cublasGemmAlgo_t(0); }, unsupported},
  };
  const int calls = strided_batched_calls.load();
  for (const Case<StridedArgs>& c : cases) {
    StridedArgs x = valid;
    c.change(x);
    EXPECT_EQ(x.call(), c.status) << c.what;
  }
  synchronize();
  EXPECT_TRUE(c_untouched(o));
  EXPECT_EQ(strided_batched_calls.load(), calls);
  EXPECT_EQ(valid.call(), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(strided_batched_calls.load(), calls + 1);
  synchronize();
}

// A valid cublasGemmGroupedBatchedEx_64 call over groups().
struct GroupedArgs {
  cublasHandle_t h;
  GroupedArrays<float> arrays;
  cudaDataType_t at = CUDA_R_32F, bt = CUDA_R_32F, ct = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  int64_t group_count = 4;
  bool null_m = false, null_a = false;  // pass a null m array, a null A pointer array
  cublasStatus_t call() const {
    const GroupedArrays<float>& g = arrays;
    return cublasGemmGroupedBatchedEx_64(
        h, g.ta.data(), g.tb.data(), null_m ? nullptr : g.m.data(), g.n.data(), g.k.data(), g.alpha.data(),
        null_a ? nullptr : reinterpret_cast<const void* const*>(g.a.data()), at, g.lda.data(),
        reinterpret_cast<const void* const*>(g.b.data()), bt, g.ldb.data(), g.beta.data(),
        reinterpret_cast<void* const*>(g.c.data()), ct, g.ldc.data(), group_count, g.size.data(), compute);
  }
};

TEST(CublasEmulated, GroupedCallsRejectEachInvalidArgument) {
  Handles hs;
  std::mt19937 rng(31);
  const auto gs = groups();
  std::vector<Operands<float>> operands = grouped_operands<float>(gs, rng);
  const GroupedArgs valid{.h = hs.blas, .arrays = GroupedArrays<float>(gs, operands)};
  const cublasStatus_t invalid = CUBLAS_STATUS_INVALID_VALUE, unsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  const std::vector<Case<GroupedArgs>> cases = {
      {"no handle", [](GroupedArgs& x) { x.h = nullptr; }, CUBLAS_STATUS_NOT_INITIALIZED},
      {"group_count < 0", [](GroupedArgs& x) { x.group_count = -1; }, invalid},
      {"a null host array", [](GroupedArgs& x) { x.null_m = true; }, invalid},
      {"a null pointer array", [](GroupedArgs& x) { x.null_a = true; }, invalid},
      {"m < 0 in a group", [](GroupedArgs& x) { x.arrays.m[1] = -1; }, invalid},
      {"k < 0 in a group", [](GroupedArgs& x) { x.arrays.k[2] = -1; }, invalid},
      {"group_size < 0", [](GroupedArgs& x) { x.arrays.size[3] = -1; }, invalid},
      {"unknown transa", [](GroupedArgs& x) { x.arrays.ta[0] = cublasOperation_t(3); }, invalid},
      {"lda < k (A transposed)", [](GroupedArgs& x) { x.arrays.lda[1] = 2; }, invalid},
      {"ldb < n (B transposed)", [](GroupedArgs& x) { x.arrays.ldb[3] = 2; }, invalid},
      {"ldc < m", [](GroupedArgs& x) { x.arrays.ldc[0] = 3; }, invalid},
      {"C of another type", [](GroupedArgs& x) { x.ct = CUDA_R_16BF; }, unsupported},
      {"half", [](GroupedArgs& x) { x.at = x.bt = x.ct = CUDA_R_16F; }, unsupported},
      {"double with compute 64F",
       [](GroupedArgs& x) { x.at = x.bt = x.ct = CUDA_R_64F, x.compute = CUBLAS_COMPUTE_64F; }, unsupported},
      {"bfloat16 with TF32",
       [](GroupedArgs& x) { x.at = x.bt = x.ct = CUDA_R_16BF, x.compute = CUBLAS_COMPUTE_32F_FAST_TF32; },
       unsupported},
  };
  const int calls = grouped_calls.load();
  for (const Case<GroupedArgs>& c : cases) {
    GroupedArgs x = valid;
    c.change(x);
    EXPECT_EQ(x.call(), c.status) << c.what;
  }
  synchronize();
  for (Operands<float>& o : operands) EXPECT_TRUE(c_untouched(o));
  EXPECT_EQ(grouped_calls.load(), calls);
  EXPECT_EQ(valid.call(), CUBLAS_STATUS_SUCCESS);
  synchronize();
}

TEST(CublasLtEmulated, RejectsLayoutsThatDisagreeWithTheOperationOrEachOther) {
  Handles hs;
  std::mt19937 rng(37);
  const Problem p{.ta = true, .m = 3, .n = 2, .k = 4, .pad = 1, .batch = 2, .beta = 0.5};
  Operands<float> o(p, rng);  // A stored 4 x 3 (ld 5), B 4 x 2 (ld 5), C 3 x 2 (ld 4)
  const LtDescs d(p, o, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  cublasLtMatmulAlgo_t algo{};
  ASSERT_EQ(d.algo(hs.lt, &algo), CUBLAS_STATUS_SUCCESS);
  const float one = 1;
  auto matmul = [&](cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                    cublasLtMatrixLayout_t dd, void* D) {
    return cublasLtMatmul(hs.lt, d.desc, &one, o.a.p(), a, o.b.p(), b, &one, o.c.p(), c, D, dd, &algo, nullptr, 0,
                          nullptr);
  };
  const int64_t sa = o.a.stride, sb = o.b.stride, sc = o.c.stride;
  const cublasStatus_t invalid = CUBLAS_STATUS_INVALID_VALUE, unsupported = CUBLAS_STATUS_NOT_SUPPORTED;
  struct Layouts {
    const char* what;
    cublasLtMatrixLayout_t a, b, c;
    cublasStatus_t status;
  };
  const std::vector<Layouts> cases = {
      {"A laid out as if not transposed (3 x 4)", layout(CUDA_R_32F, 3, 4, 5, 2, sa), d.b, d.c, invalid},
      {"A's k not B's", layout(CUDA_R_32F, 5, 3, 6, 2, sa), d.b, d.c, invalid},
      {"B's n not C's", d.a, layout(CUDA_R_32F, 4, 3, 5, 2, sb), d.c, invalid},
      {"C's m not A's", d.a, d.b, layout(CUDA_R_32F, 4, 2, 5, 2, sc), invalid},
      {"A's ld < its rows", layout(CUDA_R_32F, 4, 3, 3, 2, sa), d.b, d.c, invalid},
      {"B's ld < its rows", d.a, layout(CUDA_R_32F, 4, 2, 3, 2, sb), d.c, invalid},
      {"C's ld < its rows", d.a, d.b, layout(CUDA_R_32F, 3, 2, 2, 2, sc), invalid},
      {"A's batch count not C's", layout(CUDA_R_32F, 4, 3, 5, 1, sa), d.b, d.c, invalid},
      {"B of another type", d.a, layout(CUDA_R_16BF, 4, 2, 5, 2, sb), d.c, unsupported},
      {"all half", layout(CUDA_R_16F, 4, 3, 5, 2, sa), layout(CUDA_R_16F, 4, 2, 5, 2, sb),
       layout(CUDA_R_16F, 3, 2, 4, 2, sc), unsupported},
  };
  const int calls = lt_matmul_calls.load();
  for (const Layouts& c : cases) {
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(hs.lt, d.desc, c.a, c.b, c.c, c.c, d.pref, 1, &r, &found), c.status)
        << c.what;
    EXPECT_EQ(matmul(c.a, c.b, c.c, c.c, o.c.p()), c.status) << c.what;
  }
  const cublasLtMatrixLayout_t wider_c = layout(CUDA_R_32F, 3, 2, 5, 2, sc);
  EXPECT_EQ(matmul(d.a, d.b, d.c, wider_c, o.c.p()), invalid) << "D's layout not C's";
  EXPECT_EQ(matmul(d.a, d.b, d.c, d.c, o.c.p() + 1), invalid) << "D not C";
  for (const Layouts& c : cases)
    for (cublasLtMatrixLayout_t l : {c.a, c.b, c.c})
      if (l != d.a && l != d.b && l != d.c) (void)cublasLtMatrixLayoutDestroy(l);
  (void)cublasLtMatrixLayoutDestroy(wider_c);

  // Types: compute 64F, or a double scale, for float data.
  for (const auto& [compute, scale] : {std::pair{CUBLAS_COMPUTE_64F, CUDA_R_64F}, std::pair{CUBLAS_COMPUTE_32F, CUDA_R_64F}}) {
    const LtDescs wrong(p, o, compute, scale);
    cublasLtMatmulAlgo_t unused{};
    EXPECT_EQ(wrong.algo(hs.lt, &unused), unsupported);
  }
  // Arguments: a null alpha, no handle, no algorithm requested.
  EXPECT_EQ(cublasLtMatmul(hs.lt, d.desc, nullptr, o.a.p(), d.a, o.b.p(), d.b, &one, o.c.p(), d.c, o.c.p(), d.c,
                           &algo, nullptr, 0, nullptr),
            invalid);
  EXPECT_EQ(cublasLtMatmul(nullptr, d.desc, &one, o.a.p(), d.a, o.b.p(), d.b, &one, o.c.p(), d.c, o.c.p(), d.c,
                           &algo, nullptr, 0, nullptr),
            CUBLAS_STATUS_NOT_INITIALIZED);
  cublasLtMatmulHeuristicResult_t r{};
  int found = 0;
  EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(hs.lt, d.desc, d.a, d.b, d.c, d.c, d.pref, 0, &r, &found), invalid);
  synchronize();
  EXPECT_TRUE(c_untouched(o));
  EXPECT_EQ(lt_matmul_calls.load(), calls);
}

TEST(CublasLtEmulated, TheAlgorithmMustBeTheHeuristicsForTheseTypesAndAlignments) {
  Handles hs;
  std::mt19937 rng(59);
  const Problem p{.m = 3, .n = 2, .k = 4, .alpha = 1};  // one matrix each, 256-byte aligned
  Operands<float> o(p, rng);
  const LtDescs d(p, o, CUBLAS_COMPUTE_32F, CUDA_R_32F), tf32(p, o, CUBLAS_COMPUTE_32F_FAST_TF32, CUDA_R_32F);
  cublasLtMatmulAlgo_t algo{}, tf32_algo{};
  ASSERT_EQ(d.algo(hs.lt, &algo), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(tf32.algo(hs.lt, &tf32_algo), CUBLAS_STATUS_SUCCESS);
  const float one = 1, zero = 0;
  std::vector<float> shifted(o.a.size + 1);  // A one float in: 4-byte aligned, not 256
  std::copy(o.a.p(), o.a.p() + o.a.size, shifted.begin() + 1);
  auto matmul = [&](const float* a, const cublasLtMatmulAlgo_t* al) {
    return cublasLtMatmul(hs.lt, d.desc, &one, a, d.a, o.b.p(), d.b, &zero, o.c.p(), d.c, o.c.p(), d.c, al, nullptr,
                          0, nullptr);
  };
  const cublasLtMatmulAlgo_t made_up{};
  const int calls = lt_matmul_calls.load();
  EXPECT_EQ(matmul(o.a.p(), &tf32_algo), CUBLAS_STATUS_INVALID_VALUE) << "a TF32 algorithm for exact float";
  EXPECT_EQ(matmul(o.a.p(), &made_up), CUBLAS_STATUS_INVALID_VALUE) << "an algorithm not from the heuristic";
  EXPECT_EQ(matmul(shifted.data() + 1, &algo), CUBLAS_STATUS_INVALID_VALUE) << "A less aligned than promised";
  EXPECT_EQ(lt_matmul_calls.load(), calls);
  d.prefer(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, 4);
  cublasLtMatmulAlgo_t aligned4{};
  ASSERT_EQ(d.algo(hs.lt, &aligned4), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(matmul(shifted.data() + 1, &aligned4), CUBLAS_STATUS_SUCCESS);
  synchronize();
  expect_c(o, expected(p, o, false), "A 4-byte aligned");
  EXPECT_EQ(lt_matmul_calls.load(), calls + 1);
}

TEST(CublasLtEmulated, UnimplementedAttributesAndWrongSizesAreRejected) {
  std::mt19937 rng(61);
  const Problem p{.m = 3, .n = 2, .k = 4};
  Operands<float> o(p, rng);
  const LtDescs d(p, o, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const cublasStatus_t invalid = CUBLAS_STATUS_INVALID_VALUE;
  const int32_t t = CUBLAS_OP_T, bad_op = 3, zero = 0;
  const int64_t t64 = CUBLAS_OP_T;
  const uint32_t four = 4;
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t64, sizeof t64), invalid);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.desc, CUBLASLT_MATMUL_DESC_TRANSB, &bad_op, sizeof bad_op), invalid);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.desc, CUBLASLT_MATMUL_DESC_TRANSB, nullptr, sizeof t), invalid);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.desc, cublasLtMatmulDescAttributes_t(7), &t, sizeof t), invalid)
      << "EPILOGUE";
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(d.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &zero, sizeof zero), invalid);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(d.a, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &t64, sizeof t64), invalid);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(d.a, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &t, sizeof t), invalid);
  EXPECT_EQ(cublasLtMatrixLayoutSetAttribute(d.a, cublasLtMatrixLayoutAttribute_t(1), &zero, sizeof zero), invalid)
      << "ORDER";
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(d.pref, cublasLtMatmulPreferenceAttributes_t(0), &zero, sizeof zero),
            invalid)
      << "SEARCH_MODE";
  EXPECT_EQ(cublasLtMatmulPreferenceSetAttribute(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &four, sizeof four),
            invalid);
  EXPECT_EQ(cublasLtMatmulDescSetAttribute(d.desc, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t), CUBLAS_STATUS_SUCCESS);
}

// ---- hooks, stream order, overlap, names --------------------------------------------------------------------------

TEST(CublasEmulated, RefusalHooksRefuseTheGroupedCalls) {
  Handles hs;
  std::mt19937 rng(41);
  const auto gs = groups();
  std::vector<Operands<float>> f = grouped_operands<float>(gs, rng);
  std::vector<Operands<double>> d = grouped_operands<double>(gs, rng);
  const GroupedArrays<float> fa(gs, f);
  const GroupedArrays<double> da(gs, d);
  const int calls = grouped_calls.load();
  {
    Hook refuse(blas_refuse_grouped);
    EXPECT_EQ(fa.call(hs.blas, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(da.call(hs.blas, CUBLAS_COMPUTE_64F), CUBLAS_STATUS_NOT_SUPPORTED);
  }
  {
    Hook refuse(blas_refuse_grouped_tf32);
    EXPECT_EQ(fa.call(hs.blas, CUBLAS_COMPUTE_32F_FAST_TF32), CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(grouped_calls.load(), calls);
    synchronize();
    for (Operands<float>& o : f) EXPECT_TRUE(c_untouched(o));
    EXPECT_EQ(fa.call(hs.blas, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_SUCCESS);
  }
  EXPECT_EQ(da.call(hs.blas, CUBLAS_COMPUTE_64F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(grouped_calls.load(), calls + 2);
  synchronize();
}

TEST(CublasLtEmulated, NoHeuristicHookLeavesNoAlgorithm) {
  Handles hs;
  std::mt19937 rng(43);
  const Problem p{.m = 3, .n = 2, .k = 4, .alpha = 2};
  Operands<float> o(p, rng);
  const LtDescs d(p, o, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  const float alpha = 2, beta = 0;
  auto matmul = [&] {
    return cublasLtMatmul(hs.lt, d.desc, &alpha, o.a.p(), d.a, o.b.p(), d.b, &beta, o.c.p(), d.c, o.c.p(), d.c,
                          nullptr, nullptr, 0, nullptr);
  };
  {
    Hook none(blas_no_heuristic);
    cublasLtMatmulHeuristicResult_t r{};
    int found = -1;
    EXPECT_EQ(cublasLtMatmulAlgoGetHeuristic(hs.lt, d.desc, d.a, d.b, d.c, d.c, d.pref, 1, &r, &found),
              CUBLAS_STATUS_NOT_SUPPORTED);
    EXPECT_EQ(found, 0);
    EXPECT_EQ(matmul(), CUBLAS_STATUS_NOT_SUPPORTED) << "no algorithm given: cuBLASLt's own heuristic finds none";
  }
  cublasLtMatmulAlgo_t algo{};
  EXPECT_EQ(d.algo(hs.lt, &algo), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(matmul(), CUBLAS_STATUS_SUCCESS);
  synchronize();
  expect_c(o, expected(p, o, false), "no algorithm given");
}

TEST(CublasEmulated, ArithmeticRunsInStreamOrderWithArgumentsTakenAtTheCall) {
  Handles hs;
  std::mt19937 rng(47);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cublasSetStream(hs.blas, stream), CUBLAS_STATUS_SUCCESS);
  const Problem p{.ta = true, .m = 3, .n = 2, .k = 4, .pad = 1, .alpha = 2, .beta = 0.5};

  // Strided: alpha and beta read at the call; nothing runs until the stream is waited for.
  Operands<float> o(p, rng);
  float alpha = 2, beta = 0.5;
  ASSERT_EQ(cublasGemmStridedBatchedEx_64(hs.blas, CUBLAS_OP_T, CUBLAS_OP_N, 3, 2, 4, &alpha, o.a.p(), CUDA_R_32F,
                                          o.a.ld, 0, o.b.p(), CUDA_R_32F, o.b.ld, 0, &beta, o.c.p(), CUDA_R_32F,
                                          o.c.ld, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  alpha = beta = 100;
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  EXPECT_TRUE(c_untouched(o));
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  expect_c(o, expected(p, o, false), "strided");

  // Grouped: the pointer arrays (device memory) read when the work runs, the host arrays at the call.
  Operands<float> g(p, rng), decoy(p, rng);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  int64_t m = 3, n = 2, k = 4, lda = g.a.ld, ldb = g.b.ld, ldc = g.c.ld, size = 1;
  float alphas = 2, betas = 0.5;
  const void* A[1] = {decoy.a.p()};
  const void* B[1] = {g.b.p()};
  void* C[1] = {g.c.p()};
  ASSERT_EQ(cublasGemmGroupedBatchedEx_64(hs.blas, &ta, &tb, &m, &n, &k, &alphas, A, CUDA_R_32F, &lda, B, CUDA_R_32F,
                                          &ldb, &betas, C, CUDA_R_32F, &ldc, 1, &size, CUBLAS_COMPUTE_32F),
            CUBLAS_STATUS_SUCCESS);
  A[0] = g.a.p();
  m = n = k = 0, alphas = betas = 100;
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  expect_c(g, expected(p, g, false), "grouped");

  // cuBLASLt: the stream given, the descriptors destroyed right after the call.
  Operands<float> l(p, rng);
  ASSERT_EQ(lt_matmul(hs.lt, p, l, CUBLAS_COMPUTE_32F, stream), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cudaStreamQuery(stream), cudaErrorNotReady);
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);  // runs what it holds
  expect_c(l, expected(p, l, false), "cuBLASLt");
}

// A strided batch of two 3 x 2 C matrices one element apart.
void call_with_overlapping_c() {
  Handles hs;
  std::vector<float> a(6, 1.0f), b(4, 1.0f), c(8, 0.0f);
  const float one = 1, zero = 0;
  (void)cublasGemmStridedBatchedEx_64(hs.blas, CUBLAS_OP_N, CUBLAS_OP_N, 3, 2, 2, &one, a.data(), CUDA_R_32F, 3, 0,
                                      b.data(), CUDA_R_32F, 2, 0, &zero, c.data(), CUDA_R_32F, 3, 1, 2,
                                      CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  synchronize();
}

TEST(CublasEmulated, OverlappingCMatricesOfABatchFailTheTest) {
  EXPECT_NONFATAL_FAILURE(call_with_overlapping_c(), "C matrices overlap");
  // Interleaved but disjoint: C_0 in rows 0..2, C_1 in rows 3..5 of a 6-row C; the same as two separate matrices.
  Handles hs;
  std::mt19937 rng(53);
  const Problem p{.m = 3, .n = 2, .k = 4, .batch = 2, .alpha = 1};
  Operands<float> o(p, rng);
  ASSERT_EQ(strided(hs.blas, p, o, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_SUCCESS);
  std::vector<float> c(12, nan_of<float>());
  const float one = 1, zero = 0;
  ASSERT_EQ(cublasGemmStridedBatchedEx_64(hs.blas, CUBLAS_OP_N, CUBLAS_OP_N, 3, 2, 4, &one, o.a.p(), CUDA_R_32F,
                                          o.a.ld, o.a.stride, o.b.p(), CUDA_R_32F, o.b.ld, o.b.stride, &zero, c.data(),
                                          CUDA_R_32F, 6, 3, 2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
            CUBLAS_STATUS_SUCCESS);
  synchronize();
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 2; ++j)
      for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(c[size_t(b * 3 + i + j * 6)], o.c.at(b, i, j));
}

TEST(CublasEmulated, StatusNamesAndStrings) {
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_SUCCESS), "CUBLAS_STATUS_SUCCESS");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_NOT_SUPPORTED), "CUBLAS_STATUS_NOT_SUPPORTED");
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED), "the requested functionality is not supported");
  EXPECT_EQ(int(CUBLAS_STATUS_INVALID_VALUE), 7);
  EXPECT_EQ(int(CUBLAS_STATUS_NOT_SUPPORTED), 15);
  EXPECT_EQ(int(CUDA_R_16BF), 14);
}

}  // namespace
}  // namespace uoe::cuda_emu
