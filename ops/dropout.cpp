// dropout: a Bernoulli keep-mask from the counter-based generator, scaled by 1/(1-p); backward through mul.
#include "core/error.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {

Tensor dropout(const Tensor& x, double p, bool training, Generator* gen) {
  check_same_device("dropout", {x});
  check_floating("dropout", "x", x);
  UOE_CHECK(p >= 0.0 && p <= 1.0, "[dropout] p must be in [0, 1], got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0.0;
  // keep where u >= p, u ~ U[0,1): P(keep) = 1 - p
  const Tensor u = rand(x.shape(), TensorOptions{}.with_dtype(DType::Float32).with_device(x.device()), gen);
  // bfloat16 / float16 inputs are scaled in float32 and rounded once: 1/(1-p) itself in bfloat16 is off by up to
  // 0.4% (1.109375 for p = 0.1), which would bias every kept activation.
  const Tensor xc = x.to(compute_dtype(x.dtype()));
  const Tensor scale = where(ge(u, scalar_like(p, u)), scalar_like(1.0 / (1.0 - p), xc), scalar_like(0.0, xc));
  return (xc * scale).to(x.dtype());
}

}  // namespace uoe::ops
