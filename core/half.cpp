// Bulk float <-> bfloat16 / float16 converters: SIMD kernels (run-time ISA dispatch) + OpenMP chunking.
#include "half.h"

#include <omp.h>

#include "core/simd.h"

namespace uoe {
namespace {

// Below this many elements a single thread is faster than waking the team. At 2^18 the casts of a tiny model's weights
// to bfloat16 each step (65K-200K elements each) ran on one thread while the other waited: a third of the time a
// tiny-dense bf16 step spent waiting in OpenMP (perf, 2 threads, Zen 4).
constexpr int64_t kParallelThreshold = int64_t{1} << 16;
constexpr int64_t kChunk = int64_t{1} << 15;

// The kernels work on raw uint16_t so the loops are plain integer/float bit arithmetic.
UOE_SIMD
void kernel_f32_to_bf16(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_bf16_bits(in[i]);
}

// out[r * cols + c] = in[r * ld + c] widened, for r < rows, c < cols.
UOE_SIMD
void kernel_bf16_to_f32_rows(const uint16_t* __restrict in, int64_t ld, int64_t rows, int64_t cols,
                             float* __restrict out) {
  for (int64_t r = 0; r < rows; ++r) {
#pragma omp simd
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = bf16_bits_to_float(in[r * ld + c]);
  }
}

void kernel_bf16_to_f32(const uint16_t* in, float* out, int64_t n) { kernel_bf16_to_f32_rows(in, n, 1, n, out); }

UOE_SIMD
void kernel_f32_to_f16(const float* __restrict in, uint16_t* __restrict out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = float_to_f16_bits(in[i]);
}

UOE_SIMD
void kernel_f16_to_f32(const uint16_t* __restrict in, float* __restrict out, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = f16_bits_to_float(in[i]);
}

// Runs kernel(in + b, out + b, len) over [0, n), in parallel chunks when n is large and we are
// not already inside a parallel region. Output is identical whatever the split.
template <class In, class Out, class Kernel>
void run_chunked(const In* in, Out* out, int64_t n, Kernel kernel) {
  if (n <= 0) return;
  if (n < kParallelThreshold || omp_in_parallel()) {
    kernel(in, out, n);
    return;
  }
  const int64_t nchunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(static)
  for (int64_t c = 0; c < nchunks; ++c) {
    const int64_t b = c * kChunk;
    const int64_t len = n - b < kChunk ? n - b : kChunk;
    kernel(in + b, out + b, len);
  }
}

}  // namespace

// BFloat16/Float16 are standard-layout structs holding exactly one uint16_t, so viewing their
// arrays as uint16_t arrays is the usual pointer-interconvertibility case.
void convert_f32_to_bf16(const float* in, BFloat16* out, int64_t n) {
  run_chunked(in, reinterpret_cast<uint16_t*>(out), n, kernel_f32_to_bf16);
}

void convert_bf16_to_f32(const BFloat16* in, float* out, int64_t n) {
  run_chunked(reinterpret_cast<const uint16_t*>(in), out, n, kernel_bf16_to_f32);
}

void convert_bf16_to_f32_rows(const BFloat16* in, int64_t ld, int64_t rows, int64_t cols, float* out) {
  kernel_bf16_to_f32_rows(reinterpret_cast<const uint16_t*>(in), ld, rows, cols, out);
}

void convert_f32_to_f16(const float* in, Float16* out, int64_t n) {
  run_chunked(in, reinterpret_cast<uint16_t*>(out), n, kernel_f32_to_f16);
}

void convert_f16_to_f32(const Float16* in, float* out, int64_t n) {
  run_chunked(reinterpret_cast<const uint16_t*>(in), out, n, kernel_f16_to_f32);
}

}  // namespace uoe
