// CUDA kernels of the optimisers: the CPU signatures (ops/cpu/optimizer_kernels.h) on device pointers, plus a
// multi-tensor AdamW that updates many parameters in one launch. All run on cuda::current_stream of the
// current device; float32 state, float32 or bfloat16 parameters and gradients (bfloat16 rounded back
// stochastically with the CPU's noise, core/stochastic_round.h).
#pragma once
#include <cstdint>
#include <vector>

#include "ops/cpu/optimizer_kernels.h"

namespace uoe::cuda {

using cpu::AdamWStep;  // one step's constants, shared with the CPU kernel so UOE_KERNEL passes the same value
using cpu::RoundingKey;

// p -= lr * (m̂ / (sqrt(v̂) + eps) + wd * p), with m, v updated from g first (decoupled decay).
void adamw_update(float* p, const float* g, float* m, float* v, int64_t n, const AdamWStep& s, RoundingKey key = {});
void adamw_update(BFloat16* p, const BFloat16* g, float* m, float* v, int64_t n, const AdamWStep& s,
                  RoundingKey key = {});
// v = momentum * v + g (+ wd * p); p -= lr * v
void sgd_update(float* p, const float* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key = {});
void sgd_update(BFloat16* p, const BFloat16* g, float* v, int64_t n, float lr, float momentum, float weight_decay,
                RoundingKey key = {});
// *out (device) = Σ g² in float64: blocks over fixed ranges, their sums added by one block in a fixed order
// (deterministic). Asynchronous: nothing waits for the result.
void squared_norm(const float* g, int64_t n, double* out);
void squared_norm(const double* g, int64_t n, double* out);
void squared_norm(const BFloat16* g, int64_t n, double* out);

// One parameter of a multi-tensor update: its buffers (all on the current device), length and weight decay.
struct AdamWTensor {
  void* p;        // float32, or bfloat16 when bf16
  const void* g;  // the parameter's dtype
  bool bf16;
  float* m;
  float* v;
  int64_t n;
  float weight_decay;
  RoundingKey key;  // bfloat16 only
};
// adamw_update over every tensor (s.weight_decay is ignored: each tensor brings its own) in as few launches as
// possible: each block updates one 64 Ki-element chunk of one tensor; a launch covers up to 32 tensors and 320
// chunks. Gives the same bits as adamw_update tensor by tensor.
void adamw_update_multi(const std::vector<AdamWTensor>& tensors, const AdamWStep& s);

}  // namespace uoe::cuda
