// softmax and log_softmax over any dim: fused row kernels, forward beside backward. bfloat16 on the CPU runs the
// kernels' bfloat16 case; other reduced floats, and a GPU's, go through float32 copies.
#include <type_traits>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/rowwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "ops/rowwise_bf16.h"

namespace uoe::ops {
namespace {

// UOE_ROW_KERNEL(t, x, f(args)): the kernel for t's device and the element type of pointer x: uoe::cpu's bfloat16
// case (CPU only), else UOE_KERNEL.
#define UOE_ROW_KERNEL(t, x, call)                                                          \
  do {                                                                                      \
    if constexpr (std::is_same_v<std::remove_cvref_t<decltype(*(x))>, BFloat16>) cpu::call; \
    else UOE_KERNEL(t, call);                                                               \
  } while (0)

// Runs a row kernel over `dim`: the inputs are moved so that dim is last and contiguous, and the result is moved
// back (a view). kernel(out, rows, n, input pointers, out pointer); `out` picks the device. The rows are read in
// bfloat16 where the kernels have that case (rowwise_bf16), else in the compute dtype.
template <typename Kernel>
Tensor over_rows(const char* op, const std::vector<Tensor>& ins, int64_t dim, Kernel kernel) {
  const OnDevice on_device(ins[0]);  // the row kernels run on the current GPU
  const bool bf16 = rowwise_bf16(ins[0]);
  std::vector<Tensor> rows;
  for (const Tensor& t : ins)
    rows.push_back((bf16 ? t.to(DType::BFloat16) : compute_view(t)).detach().transpose(dim, -1).contiguous());
  Tensor out = empty(rows[0].shape(), like(rows[0]));
  const int64_t n = rows[0].dim() ? rows[0].size(-1) : 1;
  const int64_t r = n ? rows[0].numel() / n : 0;
  auto run = [&](auto tag) {
    using T = typename decltype(tag)::type;
    std::vector<const T*> ptrs;
    for (const Tensor& t : rows) ptrs.push_back(t.data_ptr<T>());
    kernel(out, r, n, ptrs, out.data_ptr<T>());
  };
  if (bf16) run(TypeTag<BFloat16>{});
  else dispatch_float(rows[0].dtype(), op, run);
  return restore_dtype(out.transpose(dim, -1), ins[0].dtype());
}

struct SoftmaxBackward final : autograd::Node {
  int64_t dim;
  bool log;
  SoftmaxBackward(int64_t d, bool l) : dim(d), log(l) {}
  std::string name() const override { return log ? "log_softmax" : "softmax"; }
  std::vector<Tensor> apply(const Tensor& g) override {
    const bool is_log = log;
    return {over_rows(name().c_str(), {saved(0), g}, dim,
                      [is_log]([[maybe_unused]] const Tensor& t, int64_t r, int64_t n, const auto& p, auto* dx) {
                        if (is_log) UOE_ROW_KERNEL(t, dx, log_softmax_backward(r, n, p[0], p[1], dx));
                        else UOE_ROW_KERNEL(t, dx, softmax_backward(r, n, p[0], p[1], dx));
                      })};
  }
};

Tensor softmax_op(const char* op, const Tensor& x, int64_t dim, bool log) {
  check_same_device(op, {x});
  check_floating(op, "x", x);
  dim = wrap_dim(dim, x.dim(), op);
  const Tensor xv = x.dim() == 0 ? x.reshape({1}) : x;
  Tensor y = over_rows(op, {xv}, dim,
                       [log]([[maybe_unused]] const Tensor& t, int64_t r, int64_t n, const auto& p, auto* out) {
                         if (log) UOE_ROW_KERNEL(t, out, log_softmax_forward(r, n, p[0], out));
                         else UOE_ROW_KERNEL(t, out, softmax_forward(r, n, p[0], out));
                       });
  if (x.dim() == 0) y = y.reshape({});
  if (auto node = autograd::record<SoftmaxBackward>(y, {x}, x.dim() == 0 ? 0 : dim, log)) node->save({y});
  return y;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) { return softmax_op("softmax", x, dim, false); }
Tensor log_softmax(const Tensor& x, int64_t dim) { return softmax_op("log_softmax", x, dim, true); }

#undef UOE_ROW_KERNEL

}  // namespace uoe::ops
