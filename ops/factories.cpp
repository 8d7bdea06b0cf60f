// The factories that fill values (declared in core/tensor.h): zeros, ones, full, arange, rand, randn, randint,
// from_vector. They run copy and random kernels, so they live in the op layer; empty() is core's.
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/rng.h"
#include "core/tensor.h"
#include "ops/backend.h"
#include "ops/kernels/copy.h"
#include "ops/kernels/random.h"

namespace uoe {
namespace {

Tensor finish(Tensor t, const TensorOptions& opt) {
  if (opt.requires_grad) t.requires_grad_(true);
  return t;
}

// Builds a float32/float64/int64 CPU tensor with `fill`, then casts and moves it as `opt` asks.
template <typename Fill>
Tensor host_built(const Shape& shape, DType host_dtype, const TensorOptions& opt, Fill fill) {
  Tensor host = empty(shape, TensorOptions{}.with_dtype(host_dtype));
  fill(host);
  Tensor t = host.to(opt.dtype).to(opt.device);
  return finish(t, opt);
}

}  // namespace

Tensor full(const Shape& shape, double value, TensorOptions opt) {
  const bool grad = opt.requires_grad;
  Tensor t = empty(shape, opt.with_requires_grad(false));
  UOE_KERNEL(t, fill(t, value));  // a GPU's on the device's current stream
  return finish(t, opt.with_requires_grad(grad));
}

Tensor zeros(const Shape& shape, TensorOptions opt) { return full(shape, 0.0, opt); }
Tensor ones(const Shape& shape, TensorOptions opt) { return full(shape, 1.0, opt); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), TensorOptions{}.with_dtype(t.dtype()).with_device(t.device())); }
Tensor scalar_tensor(double value, TensorOptions opt) { return full({}, value, opt); }

Tensor arange(double start, double end, double step, TensorOptions opt) {
  UOE_CHECK(step != 0, "[arange] step must be non-zero");
  const double span = (end - start) / step;
  UOE_CHECK(std::isfinite(span) && span < 9.2e18, "[arange] (end - start) / step must be finite and fit int64, got ",
            span, " from start ", start, ", end ", end, ", step ", step);
  const int64_t n = span > 0 ? int64_t(std::ceil(span)) : 0;
  return host_built({n}, DType::Float64, opt, [&](Tensor& t) {
    double* p = t.data_ptr<double>();
    for (int64_t i = 0; i < n; ++i) p[i] = start + double(i) * step;
  });
}

Tensor rand(const Shape& shape, TensorOptions opt, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  const DType host = opt.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  UOE_CHECK(is_floating(opt.dtype), "[rand] needs a floating dtype, got ", dtype_name(opt.dtype));
  Tensor t = empty(shape, TensorOptions{}.with_dtype(host).with_device(opt.device));
  const uint64_t start = g.reserve(uint64_t(t.numel()) * (host == DType::Float64 ? kRngWordsPerDouble : kRngWordsPerFloat));
  UOE_KERNEL(t, fill_uniform(t, g.seed(), start, 0.0, 1.0));  // a GPU draws on the device: the same bits
  return finish(t.to(opt.dtype), opt);
}

Tensor randn(const Shape& shape, TensorOptions opt, Generator* gen) {
  Generator& g = gen ? *gen : default_generator();
  const DType host = opt.dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  UOE_CHECK(is_floating(opt.dtype), "[randn] needs a floating dtype, got ", dtype_name(opt.dtype));
  return host_built(shape, host, opt, [&](Tensor& t) {
    const uint64_t start = g.reserve(uint64_t(t.numel()) * (host == DType::Float64 ? kRngWordsPerDouble : kRngWordsPerFloat));
    if (host == DType::Float64) fill_normal(t.data_ptr<double>(), t.numel(), g.seed(), start, 0.0, 1.0);
    else fill_normal(t.data_ptr<float>(), t.numel(), g.seed(), start, 0.0f, 1.0f);
  });
}

Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opt, Generator* gen) {
  UOE_CHECK(low < high, "[randint] empty range [", low, ", ", high, ")");
  UOE_CHECK(!opt.requires_grad, "[randint] integer tensors cannot require grad");
  Generator& g = gen ? *gen : default_generator();
  return host_built(shape, DType::Int64, opt, [&](Tensor& t) {
    const uint64_t start = g.reserve(uint64_t(t.numel()) * kRngWordsPerInt64);
    fill_randint(t.data_ptr<int64_t>(), t.numel(), g.seed(), start, low, high);
  });
}

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opt) {
  UOE_CHECK(int64_t(values.size()) == shape_numel(shape), "[from_vector] ", values.size(),
            " values cannot fill shape ", shape_str(shape), " (", shape_numel(shape), " elements)");
  Tensor host = empty(shape, TensorOptions{}.with_dtype(dtype_of<T>()));
  std::copy(values.begin(), values.end(), host.data_ptr<T>());
  return finish(host.to(opt.dtype).to(opt.device), opt);
}

template Tensor from_vector<float>(const std::vector<float>&, const Shape&, TensorOptions);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, TensorOptions);
template Tensor from_vector<int32_t>(const std::vector<int32_t>&, const Shape&, TensorOptions);
template Tensor from_vector<int64_t>(const std::vector<int64_t>&, const Shape&, TensorOptions);

}  // namespace uoe
