// Fused optimiser updates on the GPU: the launch of the kernels of cuda/optimizer_kernels.cuh (AdamW and SGD per
// tensor, AdamW over many tensors per launch) and of the squared gradient norm.
#include "ops/kernels/optimizer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/optimizer_kernels.cuh"
#include "cuda/stream.h"
#include "cuda/sum_doubles.cuh"

namespace uoe::cuda {
namespace {

const __nv_bfloat16* nv(const BFloat16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* nv(BFloat16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

int blocks_for(int64_t n) { return int(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535)); }

cudaStream_t stream_of_current_device() {
  int device = 0;
  UOE_CUDA_CHECK(kOp, cudaGetDevice(&device));
  return current_stream(device);
}

template <class P>
void adamw(P* p, const P* g, float* m, float* v, int64_t n, const AdamWStep& s, RoundingKey key) {
  if (n <= 0) return;
  adamw_kernel<<<blocks_for(n), kThreads, 0, stream_of_current_device()>>>(p, g, m, v, n,
                                                                           decay_of(s.lr, s.weight_decay),
                                                                           consts_of(s), key);
  check_launch(kOp);
}

template <class P>
void sum_squares(const P* g, int64_t n, double* out) {
  int device = 0;
  UOE_CUDA_CHECK(kOp, cudaGetDevice(&device));
  const cudaStream_t stream = current_stream(device);
  const int64_t per_block = kChunk, blocks = std::max<int64_t>((n + per_block - 1) / per_block, 1);
  DeviceBuffer part(device, size_t(blocks) * sizeof(double));
  squares_kernel<<<unsigned(blocks), kThreads, 0, stream>>>(g, n, per_block, part.get<double>());
  check_launch(kOp);
  sum_doubles_kernel<kThreads><<<1, kThreads, 0, stream>>>(part.get<double>(), blocks, out);
  check_launch(kOp);
}

template <class P>
void sgd(P* p, const P* g, float* v, int64_t n, float lr, float momentum, float weight_decay, RoundingKey key) {
  if (n <= 0) return;
  sgd_kernel<<<blocks_for(n), kThreads, 0, stream_of_current_device()>>>(p, g, v, n, lr, momentum, weight_decay,
                                                                         key);
  check_launch(kOp);
}

}  // namespace

void squared_norm(const float* g, int64_t n, double* out) { sum_squares(g, n, out); }
void squared_norm(const double* g, int64_t n, double* out) { sum_squares(g, n, out); }
void squared_norm(const BFloat16* g, int64_t n, double* out) { sum_squares(nv(g), n, out); }

void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s, RoundingKey key) {
  adamw(p, g, m, v, n, s, key);
}
void adamw_update(BFloat16* p, const BFloat16* g, float* m, float* v, int64_t n, const AdamWStep& s,
                  RoundingKey key) {
  adamw(nv(p), nv(g), m, v, n, s, key);
}
void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key) {
  sgd(p, g, v, n, lr, momentum, weight_decay, key);
}
void sgd_update(BFloat16* p, const BFloat16* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key) {
  sgd(nv(p), nv(g), v, n, lr, momentum, weight_decay, key);
}

void adamw_update_multi(const std::vector<AdamWTensor>& tensors, const AdamWStep& s) {
  const AdamWConsts c = consts_of(s);
  const cudaStream_t stream = stream_of_current_device();
  for_each_multi_launch(tensors, s, [&](const MultiArgs& args, int blocks) {
    adamw_multi_kernel<<<blocks, kMultiThreads, 0, stream>>>(args, c);
    check_launch(kOp);
  });
}

}  // namespace uoe::cuda
