// cross_entropy: fused, numerically stable log-softmax + NLL with ignore_index, mean over counted targets.
#include <type_traits>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/rowwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// Calls f with the logits' pointer as the kernels read them: bfloat16 (the statistics T = float32), or T.
template <class T, class F>
void with_logits(const Tensor& logits, F&& f) {
  if constexpr (std::is_same_v<T, float>) {
    if (logits.dtype() == DType::BFloat16) return f(logits.data_ptr<BFloat16>());
  }
  f(logits.data_ptr<T>());
}

// d loss / d logits = (softmax(logits) - onehot(target)) * g / count, zero on ignored rows. The scale is computed
// where g is (no g.item() round trip from a GPU).
struct CrossEntropyBackward final : autograd::Node {
  int64_t ignore_index, count;
  Shape in_shape;
  DType in_dtype;
  CrossEntropyBackward(int64_t ig, int64_t c, Shape s, DType d)
      : ignore_index(ig), count(c), in_shape(std::move(s)), in_dtype(d) {}
  std::string name() const override { return "cross_entropy"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    // logits as the forward read them: bfloat16 as they are, else in the compute dtype (that of lse)
    const Tensor logits = saved(0), targets = saved(1), lse = saved(2);
    const OnDevice on_device(logits);  // the kernels run on the current GPU
    const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
    const Tensor gc = g.detach().to(lse.dtype()).contiguous(), row_scale = empty({N}, like(lse));
    Tensor dlogits = empty(logits.shape(), like(logits));
    dispatch_float(lse.dtype(), "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(logits, cross_entropy_row_scale<T>(N, gc.data_ptr<T>(), count, row_scale.data_ptr<T>()));
      with_logits<T>(logits, [&](const auto* x) {
        using S = std::remove_cv_t<std::remove_pointer_t<decltype(x)>>;
        UOE_KERNEL(logits, cross_entropy_backward(N, V, x, targets.data_ptr<int64_t>(), ignore_index,
                                                  lse.data_ptr<T>(), row_scale.data_ptr<T>(), dlogits.data_ptr<S>()));
      });
    });
    return {restore_dtype(dlogits, in_dtype).reshape(in_shape), Tensor()};
  }
};

// Checks and counts the targets (on a GPU on the device: the one synchronisation, three numbers copied back), then
// loss = sum of loss_per_row (in double, in a fixed order) / count. Returns count. Logits: bfloat16 (lse and loss
// in float32), or in the compute dtype of lse and loss.
//                          logits: [N, V] contiguous; targets: [N] int64; lse: [N]; loss: [] (written)
int64_t forward(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const Tensor& lse,
                const Tensor& loss) {
  const int64_t N = targets.numel(), V = logits.size(-1);
  const Tensor per_row = empty({N}, like(lse));
  int64_t count = 0;
  dispatch_float(lse.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    kernels::TargetCheck c;
    with_logits<T>(logits, [&](const auto* x) {
      c = UOE_KERNEL(logits, cross_entropy_forward_checked(N, V, x, targets.data_ptr<int64_t>(), ignore_index,
                                                           per_row.data_ptr<T>(), lse.data_ptr<T>()));
    });
    UOE_CHECK(c.bad_row < 0, "[cross_entropy] target ", c.bad_target, " at position ", c.bad_row,
              " is out of range for ", V, " classes (ignore_index is ", ignore_index, ")");
    count = c.count;
    // No counted target: the loss is 0 with zero gradient (PyTorch returns NaN).
    UOE_KERNEL(logits, cross_entropy_mean_loss<T>(N, per_row.data_ptr<T>(), count, loss.data_ptr<T>()));
  });
  return count;
}

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index) {
  const char* op = "cross_entropy";
  check_same_device(op, {logits_in, targets_in});
  check_floating(op, "logits", logits_in);
  check_index(op, "targets", targets_in);
  UOE_CHECK(logits_in.dim() >= 1, "[cross_entropy] logits must be [..., classes], got ", shape_str(logits_in.shape()));
  const OnDevice on_device(logits_in);  // the kernels run on the current GPU
  const Shape want(logits_in.shape().begin(), logits_in.shape().end() - 1);
  UOE_CHECK(targets_in.shape() == want, "[cross_entropy] logits are ", shape_str(logits_in.shape()),
            " so targets must be ", shape_str(want), ", got ", shape_str(targets_in.shape()));
  // bfloat16 logits are read as they are (both backends have that case; no float32 copy of the whole logits, and
  // the gradient is written in bfloat16); other reduced floats go through a float32 copy
  const bool bf16 = logits_in.dtype() == DType::BFloat16;
  const Tensor logits = (bf16 ? logits_in : compute_view(logits_in)).detach().contiguous();
  const Tensor targets = targets_in.to(DType::Int64).contiguous();
  const int64_t N = targets.numel();
  const TensorOptions stats =
      TensorOptions{}.with_dtype(compute_dtype(logits_in.dtype())).with_device(logits_in.device());
  Tensor lse = empty({N}, stats);
  Tensor loss = empty({}, stats);  // the loss in the compute dtype: float32 for reduced-float logits
  const int64_t count = forward(logits, targets, ignore_index, lse, loss);
  if (auto node = autograd::record<CrossEntropyBackward>(loss, {logits_in, targets_in}, ignore_index, count,
                                                         logits_in.shape(), logits_in.dtype()))
    node->save({logits, targets, lse});
  return loss;
}

}  // namespace uoe::ops
