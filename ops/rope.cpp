// rope: rotary position embedding on [B, T, H, Dh]; the backward is the inverse rotation.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/rope.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// bfloat16 goes to the kernels as it is (both backends rotate it in float32 and round once); float16 in float32.
Tensor run_rope(const Tensor& x, double base, int64_t pos_offset, bool inverse) {
  const Tensor xc = (x.dtype() == DType::BFloat16 ? x : compute_view(x)).contiguous();
  return restore_dtype(UOE_KERNEL(xc, rope(xc, base, pos_offset, inverse)), x.dtype());
}

struct RopeBackward final : autograd::Node {
  double base;
  int64_t pos_offset;
  RopeBackward(double b, int64_t p) : base(b), pos_offset(p) {}
  std::string name() const override { return "rope"; }
  std::vector<Tensor> apply(const Tensor& g) override { return {run_rope(g, base, pos_offset, true)}; }
};

}  // namespace

Tensor rope(const Tensor& x, double base, int64_t pos_offset) {
  check_same_device("rope", {x});
  check_floating("rope", "x", x);
  UOE_CHECK(x.dim() == 4 && x.size(3) % 2 == 0, "[rope] x must be [B, T, H, Dh] with an even Dh, got ",
            shape_str(x.shape()));
  UOE_CHECK(base > 0 && pos_offset >= 0, "[rope] base must be positive and pos_offset non-negative, got base ", base,
            " and pos_offset ", pos_offset);
  Tensor y = run_rope(x, base, pos_offset, false);
  autograd::record<RopeBackward>(y, {x}, base, pos_offset);
  return y;
}

}  // namespace uoe::ops
