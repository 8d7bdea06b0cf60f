// C = beta * C over strided row-major matrices: the K == 0 / alpha == 0 case of the CUDA GEMM.
#include <cuda_bf16.h>

#include <algorithm>

#include "cuda/check.h"
#include "cuda/gemm_scale.h"

namespace uoe::cuda::detail {
namespace {

template <typename T, typename S>
__device__ T scale_one(T c, S beta) {
  return beta * c;
}

template <>
__device__ __nv_bfloat16 scale_one<__nv_bfloat16, float>(__nv_bfloat16 c, float beta) {
  return __float2bfloat16_rn(beta * __bfloat162float(c));
}

// One thread per element of the batch * M * N outputs (grid-stride).
template <typename T, typename S>
__global__ void scale_kernel(int64_t batch, int64_t M, int64_t N, S beta, T* C, int64_t ldc, int64_t stride_c) {
  const int64_t total = batch * M * N;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t b = i / (M * N), r = (i / N) % M, c = i % N;
    T* p = C + b * stride_c + r * ldc + c;
    *p = beta == S(0) ? T(0.0f) : scale_one<T, S>(*p, beta);
  }
}

template <typename T, typename S>
void launch(int64_t batch, int64_t M, int64_t N, S beta, T* C, int64_t ldc, int64_t stride_c, cudaStream_t stream) {
  if (batch <= 0 || M <= 0 || N <= 0 || beta == S(1)) return;
  if (batch > 1 && stride_c == 0) {
    // One C shared by the batch: scaled once per batch item, in order, as the CPU GEMM does.
    for (int64_t b = 0; b < batch; ++b) launch<T, S>(1, M, N, beta, C, ldc, 0, stream);
    return;
  }
  const int threads = 256;
  const int64_t total = batch * M * N;
  const int blocks = int(std::min<int64_t>((total + threads - 1) / threads, 65535));
  scale_kernel<T, S><<<blocks, threads, 0, stream>>>(batch, M, N, beta, C, ldc, stride_c);
  check_launch("matmul");
}

}  // namespace

void gemm_scale_c(int64_t batch, int64_t M, int64_t N, float beta, float* C, int64_t ldc, int64_t stride_c,
                  cudaStream_t stream) {
  launch<float, float>(batch, M, N, beta, C, ldc, stride_c, stream);
}

void gemm_scale_c(int64_t batch, int64_t M, int64_t N, double beta, double* C, int64_t ldc, int64_t stride_c,
                  cudaStream_t stream) {
  launch<double, double>(batch, M, N, beta, C, ldc, stride_c, stream);
}

void gemm_scale_c_bf16(int64_t batch, int64_t M, int64_t N, float beta, uint16_t* C, int64_t ldc, int64_t stride_c,
                       cudaStream_t stream) {
  launch<__nv_bfloat16, float>(batch, M, N, beta, reinterpret_cast<__nv_bfloat16*>(C), ldc, stride_c, stream);
}

}  // namespace uoe::cuda::detail
