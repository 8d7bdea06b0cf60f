// cross_entropy: fused, numerically stable log-softmax + NLL with ignore_index, mean over counted targets.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/cpu/rowwise_kernels.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// d loss / d logits = (softmax(logits) - onehot(target)) * g / count, zero on ignored rows.
struct CrossEntropyBackward final : autograd::Node {
  int64_t ignore_index, count;
  Shape in_shape;
  CrossEntropyBackward(int64_t ig, int64_t c, Shape s) : ignore_index(ig), count(c), in_shape(std::move(s)) {}
  std::string name() const override { return "cross_entropy"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const Tensor logits = saved(0), targets = saved(1), lse = saved(2);
    const int64_t V = logits.size(-1), N = logits.numel() / std::max<int64_t>(V, 1);
    Tensor dlogits = empty(logits.shape(), like(logits));
    const double scale = count > 0 ? g.item<double>() / double(count) : 0.0;
    dispatch_float(logits.dtype(), "cross_entropy", [&](auto tag) {
      using T = typename decltype(tag)::type;
      std::vector<T> row_scale(static_cast<size_t>(N), T(scale));
      cpu::cross_entropy_backward<T>(N, V, logits.data_ptr<T>(), targets.data_ptr<int64_t>(), ignore_index,
                                     lse.data_ptr<T>(), row_scale.data(), dlogits.data_ptr<T>());
    });
    return {restore_dtype(dlogits, g.dtype()).reshape(in_shape), Tensor()};
  }
};

}  // namespace

Tensor cross_entropy(const Tensor& logits_in, const Tensor& targets_in, int64_t ignore_index) {
  const char* op = "cross_entropy";
  check_cpu_op(op, {logits_in, targets_in});
  check_floating(op, "logits", logits_in);
  check_index(op, "targets", targets_in);
  UOE_CHECK(logits_in.dim() >= 1, "[cross_entropy] logits must be [..., classes], got ", shape_str(logits_in.shape()));
  const int64_t V = logits_in.size(-1);
  const Shape want(logits_in.shape().begin(), logits_in.shape().end() - 1);
  UOE_CHECK(targets_in.shape() == want, "[cross_entropy] logits are ", shape_str(logits_in.shape()),
            " so targets must be ", shape_str(want), ", got ", shape_str(targets_in.shape()));
  const Tensor logits = compute_view(logits_in).detach().contiguous();
  const Tensor targets = targets_in.to(DType::Int64).contiguous();
  const int64_t N = targets.numel();
  const int64_t* t = targets.data_ptr<int64_t>();
  int64_t count = 0;
  for (int64_t i = 0; i < N; ++i) {
    if (t[i] == ignore_index) continue;
    UOE_CHECK(t[i] >= 0 && t[i] < V, "[cross_entropy] target ", t[i], " at position ", i, " is out of range for ", V,
              " classes (ignore_index is ", ignore_index, ")");
    ++count;
  }
  Tensor lse = empty({N}, like(logits));
  Tensor loss = empty({}, like(logits));
  dispatch_float(logits.dtype(), op, [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<T> per_row(static_cast<size_t>(N));
    cpu::cross_entropy_forward<T>(N, V, logits.data_ptr<T>(), t, ignore_index, per_row.data(), lse.data_ptr<T>());
    double total = 0;  // fixed order: the same sum whatever the thread count
    for (T v : per_row) total += double(v);
    // No counted target: the loss is 0 with zero gradient (PyTorch returns NaN).
    *loss.data_ptr<T>() = T(count > 0 ? total / double(count) : 0.0);
  });
  Tensor y = restore_dtype(loss, logits_in.dtype());
  if (auto node = autograd::record<CrossEntropyBackward>(y, {logits_in, targets_in}, ignore_index, count,
                                                         logits_in.shape()))
    node->save({logits, targets, lse});
  return y;
}

}  // namespace uoe::ops
