// CPU-only build: the CUDA GEMMs (ops/kernels/gemm.h) exist and raise, naming the op; the TF32 switch stays off.
// Unreachable from the library (a CPU-only build allocates no GPU tensor), but callers dispatch without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/gemm.h"

namespace uoe::cuda {

template <typename T>
void gemm(bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, const T*, int64_t, T, T*, int64_t,
          const char* op) {
  no_cuda(op);
}
template <typename T>
void gemm_batched(int64_t, bool, bool, int64_t, int64_t, int64_t, T, const T*, int64_t, int64_t, const T*, int64_t,
                  int64_t, T, T*, int64_t, int64_t, const char* op) {
  no_cuda(op);
}
template void gemm<float>(bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                          float, float*, int64_t, const char*);
template void gemm<double>(bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t, const double*,
                           int64_t, double, double*, int64_t, const char*);
template void gemm_batched<float>(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const float*, int64_t,
                                  int64_t, const float*, int64_t, int64_t, float, float*, int64_t, int64_t,
                                  const char*);
template void gemm_batched<double>(int64_t, bool, bool, int64_t, int64_t, int64_t, double, const double*, int64_t,
                                   int64_t, const double*, int64_t, int64_t, double, double*, int64_t, int64_t,
                                   const char*);

void gemm_bf16(bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t, const BFloat16*, int64_t, float,
               BFloat16*, int64_t, const char* op) {
  no_cuda(op);
}
void gemm_batched_bf16(int64_t, bool, bool, int64_t, int64_t, int64_t, float, const BFloat16*, int64_t, int64_t,
                       const BFloat16*, int64_t, int64_t, float, BFloat16*, int64_t, int64_t, const char* op) {
  no_cuda(op);
}

void set_allow_tf32(bool) {}
bool allow_tf32() { return false; }

}  // namespace uoe::cuda
