// CPU-only build: the CUDA rowwise kernels (ops/kernels/rowwise.h) exist and raise, naming the op. Unreachable from
// the library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/rowwise.h"

namespace uoe::cuda {

template <class T>
void softmax_forward(int64_t, int64_t, const T*, T*) {
  no_cuda("softmax_forward");
}
template <class T>
void softmax_backward(int64_t, int64_t, const T*, const T*, T*) {
  no_cuda("softmax_backward");
}
template <class T>
void log_softmax_forward(int64_t, int64_t, const T*, T*) {
  no_cuda("log_softmax_forward");
}
template <class T>
void log_softmax_backward(int64_t, int64_t, const T*, const T*, T*) {
  no_cuda("log_softmax_backward");
}
template <class T>
void rms_norm_forward(int64_t, int64_t, const T*, const T*, double, T*, T*) {
  no_cuda("rms_norm_forward");
}
template <class T>
void rms_norm_backward(int64_t, int64_t, const T*, const T*, const T*, const T*, T*, T*) {
  no_cuda("rms_norm_backward");
}
template <class T>
void layer_norm_forward(int64_t, int64_t, const T*, const T*, const T*, double, T*, T*, T*) {
  no_cuda("layer_norm_forward");
}
template <class T>
void layer_norm_backward(int64_t, int64_t, const T*, const T*, const T*, const T*, const T*, T*, T*, T*) {
  no_cuda("layer_norm_backward");
}
template <class T>
void cross_entropy_forward(int64_t, int64_t, const T*, const int64_t*, int64_t, T*, T*) {
  no_cuda("cross_entropy_forward");
}
template <class T>
TargetCheck cross_entropy_forward_checked(int64_t, int64_t, const T*, const int64_t*, int64_t, T*, T*) {
  no_cuda("cross_entropy_forward_checked");
}
TargetCheck cross_entropy_forward_checked(int64_t, int64_t, const BFloat16*, const int64_t*, int64_t, float*, float*) {
  no_cuda("cross_entropy_forward_checked");
}
template <class T>
void cross_entropy_backward(int64_t, int64_t, const T*, const int64_t*, int64_t, const T*, const T*, T*) {
  no_cuda("cross_entropy_backward");
}
void cross_entropy_backward(int64_t, int64_t, const BFloat16*, const int64_t*, int64_t, const float*, const float*,
                            BFloat16*) {
  no_cuda("cross_entropy_backward");
}
template <class T>
void cross_entropy_mean_loss(int64_t, const T*, int64_t, T*) {
  no_cuda("cross_entropy_mean_loss");
}
template <class T>
void cross_entropy_row_scale(int64_t, const T*, int64_t, T*) {
  no_cuda("cross_entropy_row_scale");
}

UOE_ROWWISE_INSTANTIATE_ROWS(float)
UOE_ROWWISE_INSTANTIATE_ROWS(double)
UOE_ROWWISE_INSTANTIATE_CROSS_ENTROPY(float)
UOE_ROWWISE_INSTANTIATE_CROSS_ENTROPY(double)

}  // namespace uoe::cuda
