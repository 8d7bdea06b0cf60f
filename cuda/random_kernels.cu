// CUDA random fills: Philox4x32-10 (Salmon et al., SC'11) on the device, keyed and counted exactly as core/rng.cpp,
// so a seed and offset give the same bits on the GPU as on the CPU (uniform: integer and exactly rounded IEEE
// operations only).
#include "ops/kernels/random.h"

#include <cmath>
#include <limits>

#include "cuda/check.h"
#include "cuda/stream.h"
#include "cuda/strided_index.cuh"

namespace uoe::cuda {
namespace {

struct Block {
  uint32_t w[4];
};

// core/rng.cpp philox_block: key = {lo32(seed), hi32(seed)}, counter = {lo32(c), hi32(c), 0, 0}, ten rounds.
__device__ __forceinline__ Block philox_block(uint64_t seed, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32), c2 = 0u, c3 = 0u;
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
#pragma unroll
  for (int round = 0; round < 10; ++round) {
    const uint32_t hi0 = __umulhi(0xD2511F53u, c0), lo0 = 0xD2511F53u * c0;
    const uint32_t hi1 = __umulhi(0xCD9E8D57u, c2), lo1 = 0xCD9E8D57u * c2;
    const uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return Block{{c0, c1, c2, c3}};
}

// Thread j writes the 4 floats of Philox block start/4 + j: element i <- word start + i.
__global__ void uniform_f32_kernel(float* __restrict__ out, int64_t n, uint64_t seed, uint64_t block0, double lo,
                                   double range, float top) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < blocks; j += int64_t(gridDim.x) * blockDim.x) {
    const Block b = philox_block(seed, block0 + uint64_t(j));
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = j * 4 + k;
      if (i >= n) break;
      const double x = __dmul_rn(static_cast<double>(b.w[k] >> 8), 0x1p-24);
      const float v = __double2float_rn(__dadd_rn(lo, __dmul_rn(x, range)));  // the product is exact
      out[i] = v < top ? v : top;
    }
  }
}

// Thread j writes the 2 doubles of block start/4 + j: element i <- the 53 top bits of words 2k (low), 2k+1 (high).
__global__ void uniform_f64_kernel(double* __restrict__ out, int64_t n, uint64_t seed, uint64_t block0, double lo,
                                   double range, double top) {
  const int64_t blocks = (n + 1) / 2;
  for (int64_t j = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; j < blocks; j += int64_t(gridDim.x) * blockDim.x) {
    const Block b = philox_block(seed, block0 + uint64_t(j));
#pragma unroll
    for (int k = 0; k < 2; ++k) {
      const int64_t i = j * 2 + k;
      if (i >= n) break;
      const uint64_t bits = (static_cast<uint64_t>(b.w[2 * k + 1]) << 32) | b.w[2 * k];
      const double x = __dmul_rn(static_cast<double>(bits >> 11), 0x1p-53);
      const double v = fma(x, range, lo);
      out[i] = v < top ? v : top;
    }
  }
}

}  // namespace

void fill_uniform(const Tensor& out, uint64_t seed, uint64_t start, double low, double high) {
  UOE_CHECK(out.is_cuda() && out.is_contiguous() && (out.dtype() == DType::Float32 || out.dtype() == DType::Float64),
            "[rand] CUDA fill needs a contiguous float32/float64 CUDA tensor, got ", dtype_name(out.dtype()), " on ",
            out.device().str());
  UOE_CHECK(start % 4 == 0, "[rand] start offset must be a multiple of 4, got ", start);
  const int64_t n = out.numel();
  if (n == 0) return;
  const int device = out.device().index;
  DeviceGuard guard(device);
  cudaStream_t stream = current_stream(device);
  if (out.dtype() == DType::Float32) {
    const float l = float(low), h = float(high);
    UOE_CHECK(l <= h && std::isfinite(h - l), "[rand] need low <= high with high - low finite, got ", low, ", ", high);
    const float top = l < h ? std::nextafter(h, -std::numeric_limits<float>::infinity()) : l;
    uniform_f32_kernel<<<grid_for((n + 3) / 4), kThreads, 0, stream>>>(out.data_ptr<float>(), n, seed, start / 4,
                                                                        double(l), double(h - l), top);
  } else {
    UOE_CHECK(low <= high && std::isfinite(high - low), "[rand] need low <= high with high - low finite, got ", low,
              ", ", high);
    const double top = low < high ? std::nextafter(high, -std::numeric_limits<double>::infinity()) : low;
    uniform_f64_kernel<<<grid_for((n + 1) / 2), kThreads, 0, stream>>>(out.data_ptr<double>(), n, seed, start / 4,
                                                                        low, high - low, top);
  }
  check_launch("rand");
}

}  // namespace uoe::cuda
