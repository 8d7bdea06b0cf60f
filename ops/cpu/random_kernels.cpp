// CPU random fills: core/rng.h's Philox stream over a tensor's host buffer.
#include "core/error.h"
#include "core/rng.h"
#include "ops/kernels/random.h"

namespace uoe::cpu {

void fill_uniform(const Tensor& out, uint64_t seed, uint64_t start, double low, double high) {
  UOE_CHECK(out.is_cpu() && out.is_contiguous() && (out.dtype() == DType::Float32 || out.dtype() == DType::Float64),
            "[rand] CPU fill needs a contiguous float32/float64 CPU tensor, got ", dtype_name(out.dtype()), " on ",
            out.device().str());
  if (out.dtype() == DType::Float64) uoe::fill_uniform(out.data_ptr<double>(), out.numel(), seed, start, low, high);
  else uoe::fill_uniform(out.data_ptr<float>(), out.numel(), seed, start, float(low), float(high));
}

}  // namespace uoe::cpu
