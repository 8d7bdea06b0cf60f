// rms_norm and layer_norm over the last dim: fused row kernels, forward beside backward. bfloat16 on the CPU runs
// the kernels' bfloat16 case (saved: the bfloat16 input, float32 per-row statistics); other reduced floats, and a
// GPU's, go through float32 copies.
#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/rowwise.h"
#include "ops/op_utils.h"
#include "ops/ops.h"
#include "ops/rowwise_bf16.h"

namespace uoe::ops {
namespace {

template <typename T>
const T* ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; }
template <typename T>
T* mut_ptr_or_null(const Tensor& t) { return t.defined() ? t.data_ptr<T>() : nullptr; }

// Checks x: [..., d] and optional [d] affine parameters; returns d.
int64_t check_norm(const char* op, const Tensor& x, const Tensor& weight, const Tensor& bias) {
  check_same_device(op, {x});
  check_floating(op, "x", x);
  UOE_CHECK(x.dim() >= 1, "[", op, "] x must have at least 1 dim, got ", shape_str(x.shape()));
  const int64_t d = x.size(-1);
  for (const Tensor* p : {&weight, &bias}) {
    if (!p->defined()) continue;
    check_same_device(op, {x, *p});
    UOE_CHECK(p->shape() == Shape{d}, "[", op, "] x is ", shape_str(x.shape()), " so weight/bias must be [", d,
              "], got ", shape_str(p->shape()));
    check_same_dtype(op, x, *p);
  }
  return d;
}

// What the row kernels read: t itself where they have its bfloat16 case, else its compute-dtype view; contiguous.
Tensor rows_of(const Tensor& t) { return (rowwise_bf16(t) ? t : compute_view(t)).detach().contiguous(); }
Tensor param(const Tensor& p) { return p.defined() ? rows_of(p) : Tensor(); }
// The per-row statistics and the parameter gradients the kernels write for rows stored like x: float32 for bfloat16.
TensorOptions stats_like(const Tensor& x) { return like(x).with_dtype(compute_dtype(x.dtype())); }
// The gradient of the output as the kernels read it, in the dtype of the saved rows x.
Tensor grad_rows(const Tensor& g, const Tensor& x) { return g.to(x.dtype()).contiguous(); }

struct RmsNormBackward final : autograd::Node {
  DType dtype;
  explicit RmsNormBackward(DType d) : dtype(d) {}
  std::string name() const override { return "rms_norm"; }
  std::vector<Tensor> apply(const Tensor& g_in) override {
    const Tensor x = saved(0), w = saved(1), rstd = saved(2);
    const OnDevice on_device(x);  // the row kernels run on the current GPU
    const Tensor g = grad_rows(g_in, x);
    const int64_t d = x.size(-1), rows = d ? x.numel() / d : 0;
    Tensor dx = empty(x.shape(), like(x));
    // no rows: the kernels write nothing, and the weight's gradient is zero
    const auto param_grad = rows ? empty : zeros;
    Tensor dw = w.defined() && next[1] ? param_grad(w.shape(), stats_like(x)) : Tensor();
    if (rowwise_bf16(x))
      cpu::rms_norm_backward(rows, d, x.data_ptr<BFloat16>(), ptr_or_null<BFloat16>(w), rstd.data_ptr<float>(),
                             g.data_ptr<BFloat16>(), dx.data_ptr<BFloat16>(), mut_ptr_or_null<float>(dw));
    else dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(x, rms_norm_backward<T>(rows, d, x.data_ptr<T>(), ptr_or_null<T>(w), rstd.data_ptr<T>(),
                                         g.data_ptr<T>(), dx.data_ptr<T>(), mut_ptr_or_null<T>(dw)));
    });
    return {restore_dtype(dx, dtype), dw.defined() ? restore_dtype(dw, dtype) : Tensor()};
  }
};

struct LayerNormBackward final : autograd::Node {
  DType dtype;
  explicit LayerNormBackward(DType d) : dtype(d) {}
  std::string name() const override { return "layer_norm"; }
  std::vector<Tensor> apply(const Tensor& g_in) override {
    const Tensor x = saved(0), w = saved(1), b = saved(2), mean = saved(3), rstd = saved(4);
    const OnDevice on_device(x);
    const Tensor g = grad_rows(g_in, x);
    const int64_t d = x.size(-1), rows = d ? x.numel() / d : 0;
    Tensor dx = empty(x.shape(), like(x));
    const auto param_grad = rows ? empty : zeros;  // no rows: zero gradients, the kernels write nothing
    Tensor dw = w.defined() && next[1] ? param_grad(w.shape(), stats_like(x)) : Tensor();
    Tensor db = b.defined() && next[2] ? param_grad(b.shape(), stats_like(x)) : Tensor();
    if (rowwise_bf16(x))
      cpu::layer_norm_backward(rows, d, x.data_ptr<BFloat16>(), ptr_or_null<BFloat16>(w), mean.data_ptr<float>(),
                               rstd.data_ptr<float>(), g.data_ptr<BFloat16>(), dx.data_ptr<BFloat16>(),
                               mut_ptr_or_null<float>(dw), mut_ptr_or_null<float>(db));
    else dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(x, layer_norm_backward<T>(rows, d, x.data_ptr<T>(), ptr_or_null<T>(w), mean.data_ptr<T>(),
                                           rstd.data_ptr<T>(), g.data_ptr<T>(), dx.data_ptr<T>(),
                                           mut_ptr_or_null<T>(dw), mut_ptr_or_null<T>(db)));
    });
    return {restore_dtype(dx, dtype), dw.defined() ? restore_dtype(dw, dtype) : Tensor(),
            db.defined() ? restore_dtype(db, dtype) : Tensor()};
  }
};

}  // namespace

Tensor rms_norm(const Tensor& x_in, const Tensor& weight, double eps) {
  const int64_t d = check_norm("rms_norm", x_in, weight, Tensor());
  const OnDevice on_device(x_in);  // the row kernels run on the current GPU
  const Tensor x = rows_of(x_in), w = param(weight);
  const int64_t rows = d ? x.numel() / d : 0;
  Tensor y = empty(x.shape(), like(x)), rstd = empty({rows}, stats_like(x));
  if (rowwise_bf16(x))
    cpu::rms_norm_forward(rows, d, x.data_ptr<BFloat16>(), ptr_or_null<BFloat16>(w), eps, y.data_ptr<BFloat16>(),
                          rstd.data_ptr<float>());
  else dispatch_float(x.dtype(), "rms_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    UOE_KERNEL(x, rms_norm_forward<T>(rows, d, x.data_ptr<T>(), ptr_or_null<T>(w), T(eps), y.data_ptr<T>(),
                                      rstd.data_ptr<T>()));
  });
  y = restore_dtype(y, x_in.dtype());
  if (auto node = autograd::record<RmsNormBackward>(y, {x_in, weight}, x_in.dtype())) node->save({x, w, rstd});
  return y;
}

Tensor layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t d = check_norm("layer_norm", x_in, weight, bias);
  const OnDevice on_device(x_in);
  const Tensor x = rows_of(x_in), w = param(weight), b = param(bias);
  const int64_t rows = d ? x.numel() / d : 0;
  Tensor y = empty(x.shape(), like(x)), mean = empty({rows}, stats_like(x)), rstd = empty({rows}, stats_like(x));
  if (rowwise_bf16(x))
    cpu::layer_norm_forward(rows, d, x.data_ptr<BFloat16>(), ptr_or_null<BFloat16>(w), ptr_or_null<BFloat16>(b), eps,
                            y.data_ptr<BFloat16>(), mean.data_ptr<float>(), rstd.data_ptr<float>());
  else dispatch_float(x.dtype(), "layer_norm", [&](auto tag) {
    using T = typename decltype(tag)::type;
    UOE_KERNEL(x, layer_norm_forward<T>(rows, d, x.data_ptr<T>(), ptr_or_null<T>(w), ptr_or_null<T>(b), T(eps),
                                        y.data_ptr<T>(), mean.data_ptr<T>(), rstd.data_ptr<T>()));
  });
  y = restore_dtype(y, x_in.dtype());
  if (auto node = autograd::record<LayerNormBackward>(y, {x_in, weight, bias}, x_in.dtype()))
    node->save({x, w, b, mean, rstd});
  return y;
}

}  // namespace uoe::ops
