// cross_entropy: fused, numerically stable log-softmax + NLL with ignore_index, mean over counted targets.
#include <type_traits>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/cpu/rowwise_kernels.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#if UOE_WITH_CUDA
#include "cuda/rowwise_kernels.h"
#endif

namespace uoe::ops {
namespace {

// d loss / d logits = (softmax(logits) - onehot(target)) * g / count, zero on ignored rows.
struct CrossEntropyBackward final : autograd::Node {
  int64_t ignore_index, count;
  Shape in_shape;
  DType in_dtype;
  CrossEntropyBackward(int64_t ig, int64_t c, Shape s, DType d)
      : ignore_index(ig), count(c), in_shape(std::move(s)), in_dtype(d) {}
  std::string name() const override { return "cross_entropy"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    // logits as the forward read them: bfloat16 on a GPU, else in the compute dtype (that of lse)
    const Tensor logits = saved(0), targets = saved(1), lse = saved(2);
    const OnDevice on_device(logits);  // the kernels run on the current GPU
    const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
    Tensor dlogits = empty(logits.shape(), like(logits));
#if UOE_WITH_CUDA
    if (logits.is_cuda()) {  // the scale stays on the device: no g.item() round trip
      const Tensor gc = g.detach().to(lse.dtype()).contiguous(), row_scale = empty({N}, like(lse));
      dispatch_float(lse.dtype(), "cross_entropy", [&](auto tag) {
        using T = typename decltype(tag)::type;
        cuda::cross_entropy_row_scale<T>(N, gc.data_ptr<T>(), count, row_scale.data_ptr<T>());
        if constexpr (std::is_same_v<T, float>) {
          if (logits.dtype() == DType::BFloat16)
            return cuda::cross_entropy_backward_bf16(N, V, logits.data_ptr<BFloat16>(), targets.data_ptr<int64_t>(),
                                                     ignore_index, lse.data_ptr<float>(), row_scale.data_ptr<float>(),
                                                     dlogits.data_ptr<BFloat16>());
        }
        cuda::cross_entropy_backward<T>(N, V, logits.data_ptr<T>(), targets.data_ptr<int64_t>(), ignore_index,
                                        lse.data_ptr<T>(), row_scale.data_ptr<T>(), dlogits.data_ptr<T>());
      });
      return {restore_dtype(dlogits, in_dtype).reshape(in_shape), Tensor()};
    }
#endif
    const double scale = count > 0 ? g.item<double>() / double(count) : 0.0;
    dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<T> row_scale(static_cast<size_t>(N), T(scale));
      cpu::cross_entropy_backward<T>(N, V, logits.data_ptr<T>(), targets.data_ptr<int64_t>(), ignore_index,
                                     lse.data_ptr<T>(), row_scale.data(), dlogits.data_ptr<T>());
    });
    return {restore_dtype(dlogits, in_dtype).reshape(in_shape), Tensor()};
  }
};

// The forward on the host: checks and counts the targets, then loss = sum of loss_per_row (in double, in row
// order: the same sum whatever the thread count) / count. Returns count.
//                          logits: [N, V] contiguous; targets: [N] int64; lse: [N]; loss: [] (written)
int64_t forward_cpu(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const Tensor& lse,
                    const Tensor& loss) {
  const int64_t N = targets.numel(), V = logits.size(-1);
  const int64_t* t = targets.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (t[i] == ignore_index) continue;
    UOE_CHECK(t[i] >= 0 && t[i] < V, "[cross_entropy] target ", t[i], " at position ", i, " is out of range for ", V,
              " classes (ignore_index is ", ignore_index, ")");
    ++count;
  }
  dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> per_row(static_cast<size_t>(N));
    cpu::cross_entropy_forward<T>(N, V, logits.data_ptr<T>(), t, ignore_index, per_row.data(), lse.data_ptr<T>());
    double total = 0;  // fixed order: the same sum whatever the thread count
    for (T v : per_row) total += double(v);
    // No counted target: the loss is 0 with zero gradient (PyTorch returns NaN).
    *loss.data_ptr<T>() = T(count > 0 ? total / double(count) : 0.0);
  });
  return count;
}

#if UOE_WITH_CUDA
// The same on a GPU: the targets are checked and counted on the device (the one synchronisation: three numbers
// copied back), the mean is a one-block kernel (double accumulation, fixed order). Logits: bfloat16 (lse and loss
// in float32), or in the compute dtype of lse and loss.
int64_t forward_cuda(const Tensor& logits, const Tensor& targets, int64_t ignore_index, const Tensor& lse,
                     const Tensor& loss) {
  const int64_t N = targets.numel(), V = logits.size(-1);
  const Tensor per_row = empty({N}, like(lse));
  int64_t count = 0;
  dispatch_float(lse.dtype(), "cross_entropy", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const int64_t* t = targets.data_ptr<int64_t>();
    cuda::TargetCheck c;
    if constexpr (std::is_same_v<T, float>) {
      if (logits.dtype() == DType::BFloat16)
        c = cuda::cross_entropy_forward_checked_bf16(N, V, logits.data_ptr<BFloat16>(), t, ignore_index,
                                                     per_row.data_ptr<float>(), lse.data_ptr<float>());
    }
    if (logits.dtype() != DType::BFloat16)
      c = cuda::cross_entropy_forward_checked<T>(N, V, logits.data_ptr<T>(), t, ignore_index, per_row.data_ptr<T>(),
                                                 lse.data_ptr<T>());
    UOE_CHECK(c.bad_row < 0, "[cross_entropy] target ", c.bad_target, " at position ", c.bad_row,
              " is out of range for ", V, " classes (ignore_index is ", ignore_index, ")");
    count = c.count;
    cuda::cross_entropy_mean_loss<T>(N, per_row.data_ptr<T>(), count, loss.data_ptr<T>());
  });
  return count;
}
#endif

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
  // bfloat16 logits on a GPU are read as they are; elsewhere reduced floats go through a float32 copy
  const Tensor logits = kernel_view(logits_in).detach().contiguous();
  const Tensor targets = targets_in.to(DType::Int64).contiguous();
  const int64_t N = targets.numel();
  const TensorOptions stats =
      TensorOptions{}.with_dtype(compute_dtype(logits_in.dtype())).with_device(logits_in.device());
  Tensor lse = empty({N}, stats);
  Tensor loss = empty({}, stats);  // the loss in the compute dtype: float32 for reduced-float logits
#if UOE_WITH_CUDA
  const int64_t count = logits.is_cuda() ? forward_cuda(logits, targets, ignore_index, lse, loss)
                                         : forward_cpu(logits, targets, ignore_index, lse, loss);
#else
  const int64_t count = forward_cpu(logits, targets, ignore_index, lse, loss);
#endif
  if (auto node = autograd::record<CrossEntropyBackward>(loss, {logits_in, targets_in}, ignore_index, count,
                                                         logits_in.shape(), logits_in.dtype()))
    node->save({logits, targets, lse});
  return loss;
}

}  // namespace uoe::ops
