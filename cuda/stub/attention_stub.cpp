// CPU-only build: the CUDA attention kernels (ops/kernels/attention.h) exist and raise, naming the op. Unreachable
// from the library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/attention.h"

namespace uoe::cuda {

template <typename T>
void attention_forward(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*, AttnStrides, T*,
                       AttnStrides, T*) {
  no_cuda("scaled_dot_product_attention");
}
template <typename T>
void attention_backward(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*, AttnStrides,
                        const T*, AttnStrides, const T*, const T*, AttnStrides, T*, AttnStrides, T*, AttnStrides, T*,
                        AttnStrides) {
  no_cuda("scaled_dot_product_attention");
}
template void attention_forward<float>(const AttnShape&, const float*, AttnStrides, const float*, AttnStrides,
                                       const float*, AttnStrides, float*, AttnStrides, float*);
template void attention_forward<double>(const AttnShape&, const double*, AttnStrides, const double*, AttnStrides,
                                        const double*, AttnStrides, double*, AttnStrides, double*);
template void attention_backward<float>(const AttnShape&, const float*, AttnStrides, const float*, AttnStrides,
                                        const float*, AttnStrides, const float*, AttnStrides, const float*,
                                        const float*, AttnStrides, float*, AttnStrides, float*, AttnStrides, float*,
                                        AttnStrides);
template void attention_backward<double>(const AttnShape&, const double*, AttnStrides, const double*, AttnStrides,
                                         const double*, AttnStrides, const double*, AttnStrides, const double*,
                                         const double*, AttnStrides, double*, AttnStrides, double*, AttnStrides,
                                         double*, AttnStrides);

void attention_forward_bf16(const AttnShape&, const BFloat16*, AttnStrides, const BFloat16*, AttnStrides,
                            const BFloat16*, AttnStrides, BFloat16*, AttnStrides, float*) {
  no_cuda("scaled_dot_product_attention");
}
void attention_backward_bf16(const AttnShape&, const BFloat16*, AttnStrides, const BFloat16*, AttnStrides,
                             const BFloat16*, AttnStrides, const BFloat16*, AttnStrides, const float*, const BFloat16*,
                             AttnStrides, BFloat16*, AttnStrides, BFloat16*, AttnStrides, BFloat16*, AttnStrides) {
  no_cuda("scaled_dot_product_attention");
}
bool attention_bf16_uses_tensor_cores(const AttnShape&, std::initializer_list<const void*>,
                                      std::initializer_list<AttnStrides>) {
  no_cuda("scaled_dot_product_attention");
}

}  // namespace uoe::cuda
