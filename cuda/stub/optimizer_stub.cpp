// CPU-only build: the CUDA optimiser kernels (ops/kernels/optimizer.h) exist and raise, naming the op. Unreachable
// from the library (a CPU-only build allocates no GPU tensor), but callers dispatch to them without #if.
#include "cuda/stub/no_cuda.h"
#include "ops/kernels/optimizer.h"

namespace uoe::cuda {
void adamw_update(float*, const float*, float*, float*, int64_t, const AdamWStep&, RoundingKey) { no_cuda("adamw_update"); }
void adamw_update(BFloat16*, const BFloat16*, float*, float*, int64_t, const AdamWStep&, RoundingKey) {
  no_cuda("adamw_update");
}
void adamw_update_multi(const std::vector<AdamWTensor>&, const AdamWStep&) { no_cuda("adamw_update_multi"); }
void sgd_update(float*, const float*, float*, int64_t, float, float, float, RoundingKey) { no_cuda("sgd_update"); }
void sgd_update(BFloat16*, const BFloat16*, float*, int64_t, float, float, float, RoundingKey) { no_cuda("sgd_update"); }
void squared_norm(const float*, int64_t, double*) { no_cuda("squared_norm"); }
void squared_norm(const double*, int64_t, double*) { no_cuda("squared_norm"); }
void squared_norm(const BFloat16*, int64_t, double*) { no_cuda("squared_norm"); }

}  // namespace uoe::cuda
