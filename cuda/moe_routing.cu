// uoe::cuda MoE routing: the launch of the kernels of cuda/moe_routing.cuh (top-k / top-p routing forward and
// backward, the group L2 norm forward and backward).
#include "ops/kernels/moe.h"

#include <cuda_runtime.h>

#include <cmath>

#include "cuda/moe_common.cuh"
#include "cuda/moe_routing.cuh"

namespace uoe::cuda {
namespace {

template <typename S, typename T>
void l2norm_forward(int64_t rows, int64_t groups, int64_t r, const S* h, T* norm) {
  const int64_t count = rows * groups;
  if (count == 0) return;
  const LaunchContext c = launch_context("group_l2norm");
  group_l2norm_forward_kernel<S, T><<<blocks_for(count), kThreads, 0, c.stream>>>(count, r, h, norm);
  check_launch("group_l2norm");
}

template <typename S, typename T>
void l2norm_backward(int64_t rows, int64_t groups, int64_t r, const S* h, const T* norm, const T* dnorm, S* dh) {
  const int64_t count = rows * groups * r;
  if (count == 0) return;
  const LaunchContext c = launch_context("group_l2norm backward");
  group_l2norm_backward_kernel<S, T><<<blocks_for(count), kThreads, 0, c.stream>>>(count, r, h, norm, dnorm, dh);
  check_launch("group_l2norm backward");
}

const __nv_bfloat16* nv(const BFloat16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* nv(BFloat16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

// ---- routing ----------------------------------------------------------------------------------------------
template <typename T>
void route_forward(const RouteSpec& s, const T* scores, int64_t* indices, T* weights, T* probs) {
  const char* op = s.p < 0 ? "topk_route" : "topp_route";
  if (s.T == 0) return;
  const LaunchContext c = launch_context(op);
  route_forward_kernel<T><<<blocks_for(s.T, 128), 128, 0, c.stream>>>(s, scores, indices, weights, probs);
  check_launch(op);
}

template <typename T>
void route_backward(const RouteSpec& s, const int64_t* indices, const T* weights, const T* probs, const T* dweights,
                    T* dscores) {
  const char* op = s.p < 0 ? "topk_route backward" : "topp_route backward";
  if (s.T == 0) return;
  const LaunchContext c = launch_context(op);
  route_backward_kernel<T><<<blocks_for(s.T, 128), 128, 0, c.stream>>>(s, indices, weights, probs, dweights, dscores);
  check_launch(op);
}

// ---- group L2 norm ----------------------------------------------------------------------------------------
template <typename T>
void group_l2norm_forward(int64_t rows, int64_t groups, int64_t r, const T* h, T* norm) {
  l2norm_forward(rows, groups, r, h, norm);
}

template <typename T>
void group_l2norm_backward(int64_t rows, int64_t groups, int64_t r, const T* h, const T* norm, const T* dnorm, T* dh) {
  l2norm_backward(rows, groups, r, h, norm, dnorm, dh);
}

void group_l2norm_forward_bf16(int64_t rows, int64_t groups, int64_t r, const BFloat16* h, float* norm) {
  l2norm_forward(rows, groups, r, nv(h), norm);
}

void group_l2norm_backward_bf16(int64_t rows, int64_t groups, int64_t r, const BFloat16* h, const float* norm,
                                const float* dnorm, BFloat16* dh) {
  l2norm_backward(rows, groups, r, nv(h), norm, dnorm, nv(dh));
}

#define UOE_CUDA_ROUTE_INSTANTIATE(T)                                                                                 \
  template void route_forward<T>(const RouteSpec&, const T*, int64_t*, T*, T*);                                       \
  template void route_backward<T>(const RouteSpec&, const int64_t*, const T*, const T*, const T*, T*);                \
  template void group_l2norm_forward<T>(int64_t, int64_t, int64_t, const T*, T*);                                     \
  template void group_l2norm_backward<T>(int64_t, int64_t, int64_t, const T*, const T*, const T*, T*);
UOE_CUDA_ROUTE_INSTANTIATE(float)
UOE_CUDA_ROUTE_INSTANTIATE(double)
#undef UOE_CUDA_ROUTE_INSTANTIATE

}  // namespace uoe::cuda
