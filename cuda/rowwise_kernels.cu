// uoe::cuda row ops (softmax, log_softmax, rms_norm, layer_norm): the launch of the row kernels
// (cuda/rowwise_kernels.cuh), with the vector width and threads per row of the shape, and the norms' parameter
// gradients summed chunk by chunk in a fixed order.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "cuda/rowwise_kernels.cuh"
#include "cuda/rowwise_launch.cuh"
#include "ops/kernels/rowwise.h"

namespace uoe::cuda {
namespace {

using namespace rowwise;

// ---- launchers ---------------------------------------------------------------------------------------------
// Norm parameter gradients: rows per chunk, a function of `rows` only (at most kMaxChunks chunks).
constexpr int64_t kMinChunkRows = 8;
constexpr int64_t kMaxChunks = 1024;
int64_t chunk_rows(int64_t rows) { return std::max(kMinChunkRows, (rows + kMaxChunks - 1) / kMaxChunks); }

template <class T>
void reduce_chunks(const LaunchContext& l, int64_t nc, int64_t n, const T* part, T* out, const char* op) {
  reduce_chunks_kernel<T><<<unsigned((n + 31) / 32), dim3(32, 8), 0, l.stream>>>(nc, n, part, out);
  check_launch(op);
}

template <class T, bool LOG>
void softmax_fwd(int64_t rows, int64_t n, const T* x, T* y) {
  if (rows <= 0 || n <= 0) return;
  const char* op = LOG ? "log_softmax" : "softmax";
  const LaunchContext l = launch_context(op);
  dispatch_rows<T>(n, {x, y}, [&](auto v, auto tpr) {
    constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
    softmax_fwd_kernel<T, V, TPR, LOG><<<grid_for<TPR>(rows), Group<TPR>::kBlock, 0, l.stream>>>(rows, n, x, y);
  });
  check_launch(op);
}

template <class T, bool LOG>
void softmax_bwd(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  if (rows <= 0 || n <= 0) return;
  const char* op = LOG ? "log_softmax backward" : "softmax backward";
  const LaunchContext l = launch_context(op);
  dispatch_rows<T>(n, {y, dy, dx}, [&](auto v, auto tpr) {
    constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
    softmax_bwd_kernel<T, V, TPR, LOG><<<grid_for<TPR>(rows), Group<TPR>::kBlock, 0, l.stream>>>(rows, n, y, dy, dx);
  });
  check_launch(op);
}

}  // namespace

template <class T>
void softmax_forward(int64_t rows, int64_t n, const T* x, T* y) {
  softmax_fwd<T, false>(rows, n, x, y);
}
template <class T>
void log_softmax_forward(int64_t rows, int64_t n, const T* x, T* y) {
  softmax_fwd<T, true>(rows, n, x, y);
}
template <class T>
void softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  softmax_bwd<T, false>(rows, n, y, dy, dx);
}
template <class T>
void log_softmax_backward(int64_t rows, int64_t n, const T* y, const T* dy, T* dx) {
  softmax_bwd<T, true>(rows, n, y, dy, dx);
}

template <class T>
void rms_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, double eps, T* y, T* rstd) {
  if (rows <= 0 || n <= 0) return;
  const LaunchContext l = launch_context("rms_norm");
  dispatch_rows<T>(n, {x, weight, y}, [&](auto v, auto tpr) {
    constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
    rms_fwd_kernel<T, V, TPR>
        <<<grid_for<TPR>(rows), Group<TPR>::kBlock, 0, l.stream>>>(rows, n, x, weight, T(eps), y, rstd);
  });
  check_launch("rms_norm");
}

template <class T>
void rms_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* rstd, const T* dy, T* dx,
                       T* dweight) {
  if (rows <= 0 || n <= 0) return;
  const char* op = "rms_norm backward";
  const LaunchContext l = launch_context(op);
  const int64_t chunk = dweight ? chunk_rows(rows) : 1, groups = (rows + chunk - 1) / chunk;
  DeviceBuffer part(l.device, dweight ? size_t(groups * n) * sizeof(T) : 0);
  dispatch_rows<T>(n, {x, weight, dy, dx}, [&](auto v, auto tpr) {
    constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
    rms_bwd_kernel<T, V, TPR><<<grid_for<TPR>(groups), Group<TPR>::kBlock, 0, l.stream>>>(
        rows, n, chunk, x, weight, rstd, dy, dx, part.get<T>());
  });
  check_launch(op);
  if (dweight) reduce_chunks(l, groups, n, part.get<T>(), dweight, op);
}

template <class T>
void layer_norm_forward(int64_t rows, int64_t n, const T* x, const T* weight, const T* bias, double eps, T* y,
                        T* mean, T* rstd) {
  if (rows <= 0 || n <= 0) return;
  const LaunchContext l = launch_context("layer_norm");
  dispatch_rows<T>(n, {x, weight, bias, y}, [&](auto v, auto tpr) {
    constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
    ln_fwd_kernel<T, V, TPR>
        <<<grid_for<TPR>(rows), Group<TPR>::kBlock, 0, l.stream>>>(rows, n, x, weight, bias, T(eps), y, mean, rstd);
  });
  check_launch("layer_norm");
}

template <class T>
void layer_norm_backward(int64_t rows, int64_t n, const T* x, const T* weight, const T* mean, const T* rstd,
                         const T* dy, T* dx, T* dweight, T* dbias) {
  if (rows <= 0 || n <= 0) return;
  const char* op = "layer_norm backward";
  const LaunchContext l = launch_context(op);
  const bool params = dweight || dbias;
  const int64_t chunk = params ? chunk_rows(rows) : 1, groups = (rows + chunk - 1) / chunk;
  DeviceBuffer part(l.device, params ? size_t(2 * groups * n) * sizeof(T) : 0);
  dispatch_rows<T>(n, {x, weight, dy, dx}, [&](auto v, auto tpr) {
    constexpr int V = decltype(v)::value, TPR = decltype(tpr)::value;
    ln_bwd_kernel<T, V, TPR><<<grid_for<TPR>(groups), Group<TPR>::kBlock, 0, l.stream>>>(
        rows, n, chunk, x, weight, mean, rstd, dy, dx, part.get<T>());
  });
  check_launch(op);
  if (dweight) reduce_chunks(l, groups, n, part.get<T>(), dweight, op);
  if (dbias) reduce_chunks(l, groups, n, part.get<T>() + groups * n, dbias, op);
}

UOE_ROWWISE_INSTANTIATE_ROWS(float)
UOE_ROWWISE_INSTANTIATE_ROWS(double)

}  // namespace uoe::cuda
