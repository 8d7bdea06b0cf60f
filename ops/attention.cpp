// scaled_dot_product_attention: fused, tiled causal attention (FlashAttention-style) with its own backward kernel.
#include <cmath>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/attention.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

// A [B, H, T, Dh] operand with a contiguous head dim, as the kernels take it.
Tensor head_dim_contiguous(const Tensor& t) { return t.stride(-1) == 1 ? t : t.contiguous(); }
kernels::AttnStrides strides_of(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2)}; }

// A new [B, H, T, Dh] tensor laid out as [B, T, H, Dh] in memory, so that
// out.transpose(1, 2).reshape(B, T, H*Dh) is a free view.
Tensor new_bthd(const Shape& bhtd, const Tensor& like_t) {
  return empty({bhtd[0], bhtd[2], bhtd[1], bhtd[3]}, like(like_t)).transpose(1, 2);
}

struct AttentionBackward final : autograd::Node {
  kernels::AttnShape shape;
  explicit AttentionBackward(kernels::AttnShape s) : shape(s) {}
  std::string name() const override { return "scaled_dot_product_attention"; }
  std::vector<Tensor> apply(const Tensor& g_in) override {
    const Tensor q = saved(0), k = saved(1), v = saved(2), out = saved(3), lse = saved(4);
    const OnDevice on_device(q);
    const DType dt = g_in.dtype();
    if (q.dtype() == DType::BFloat16) {  // q, k, v, out saved in bf16, lse in float32 (the bf16 kernels)
      const Tensor g = head_dim_contiguous(g_in.to(DType::BFloat16));
      Tensor dq = new_bthd(q.shape(), q), dk = new_bthd(k.shape(), k), dv = new_bthd(v.shape(), v);
      UOE_KERNEL(q, attention_backward_bf16(shape, q.data_ptr<BFloat16>(), strides_of(q), k.data_ptr<BFloat16>(),
                                            strides_of(k), v.data_ptr<BFloat16>(), strides_of(v),
                                            out.data_ptr<BFloat16>(), strides_of(out), lse.data_ptr<float>(),
                                            g.data_ptr<BFloat16>(), strides_of(g), dq.data_ptr<BFloat16>(),
                                            strides_of(dq), dk.data_ptr<BFloat16>(), strides_of(dk),
                                            dv.data_ptr<BFloat16>(), strides_of(dv)));
      return {restore_dtype(dq, dt), restore_dtype(dk, dt), restore_dtype(dv, dt)};
    }
    const Tensor g = head_dim_contiguous(compute_view(g_in));
    Tensor dq = new_bthd(q.shape(), q), dk = new_bthd(k.shape(), k), dv = new_bthd(v.shape(), v);
    dispatch_float(q.dtype(), "scaled_dot_product_attention", [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(q, attention_backward<T>(shape, q.data_ptr<T>(), strides_of(q), k.data_ptr<T>(), strides_of(k),
                                          v.data_ptr<T>(), strides_of(v), out.data_ptr<T>(), strides_of(out),
                                          lse.data_ptr<T>(), g.data_ptr<T>(), strides_of(g), dq.data_ptr<T>(),
                                          strides_of(dq), dk.data_ptr<T>(), strides_of(dk), dv.data_ptr<T>(),
                                          strides_of(dv)));
    });
    return {restore_dtype(dq, dt), restore_dtype(dk, dt), restore_dtype(dv, dt)};
  }
};

}  // namespace

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, bool causal,
                                    double scale) {
  const char* op = "scaled_dot_product_attention";
  check_same_device(op, {q_in, k_in, v_in});
  check_floating(op, "q", q_in);
  UOE_CHECK(q_in.dtype() == k_in.dtype() && q_in.dtype() == v_in.dtype(), "[", op, "] dtypes differ: q ",
            describe(q_in), ", k ", describe(k_in), ", v ", describe(v_in));
  UOE_CHECK(q_in.dim() == 4 && k_in.dim() == 4 && v_in.dim() == 4, "[", op,
            "] q, k, v must be [B, H, T, Dh]; got q ", shape_str(q_in.shape()), ", k ", shape_str(k_in.shape()), ", v ",
            shape_str(v_in.shape()));
  const int64_t B = q_in.size(0), H = q_in.size(1), T = q_in.size(2), Dh = q_in.size(3), Hkv = k_in.size(1);
  UOE_CHECK(k_in.shape() == v_in.shape() && k_in.size(0) == B && k_in.size(2) == T && k_in.size(3) == Dh &&
                Hkv > 0 && H % Hkv == 0,
            "[", op, "] q is ", shape_str(q_in.shape()), ", k is ", shape_str(k_in.shape()), ", v is ",
            shape_str(v_in.shape()), ": k and v must be [B, Hkv, T, Dh] with H divisible by Hkv");
  const OnDevice on_device(q_in);
  const double scale_or_default = scale > 0 ? scale : 1.0 / std::sqrt(double(std::max<int64_t>(Dh, 1)));
  const kernels::AttnShape shape{B, H, Hkv, T, Dh, scale_or_default, causal};
  if (q_in.dtype() == DType::BFloat16) {  // bf16 operands directly, float32 lse (tensor cores, VDPBF16PS)
    const Tensor q = head_dim_contiguous(q_in), k = head_dim_contiguous(k_in), v = head_dim_contiguous(v_in);
    Tensor out = new_bthd(q.shape(), q);
    Tensor lse = empty({B, H, T}, TensorOptions{}.with_dtype(DType::Float32).with_device(q.device()));
    UOE_KERNEL(q, attention_forward_bf16(shape, q.data_ptr<BFloat16>(), strides_of(q), k.data_ptr<BFloat16>(),
                                         strides_of(k), v.data_ptr<BFloat16>(), strides_of(v),
                                         out.data_ptr<BFloat16>(), strides_of(out), lse.data_ptr<float>()));
    if (auto node = autograd::record<AttentionBackward>(out, {q_in, k_in, v_in}, shape))
      node->save({q, k, v, out, lse});
    return out;
  }
  const Tensor q = head_dim_contiguous(compute_view(q_in)), k = head_dim_contiguous(compute_view(k_in)),
               v = head_dim_contiguous(compute_view(v_in));
  Tensor out = new_bthd(q.shape(), q);
  Tensor lse = empty({B, H, T}, like(q));
  dispatch_float(q.dtype(), op, [&](auto tag) {
    using S = typename decltype(tag)::type;
    UOE_KERNEL(q, attention_forward<S>(shape, q.data_ptr<S>(), strides_of(q), k.data_ptr<S>(), strides_of(k),
                                       v.data_ptr<S>(), strides_of(v), out.data_ptr<S>(), strides_of(out),
                                       lse.data_ptr<S>()));
  });
  Tensor y = restore_dtype(out, q_in.dtype());
  if (auto node = autograd::record<AttentionBackward>(y, {q_in, k_in, v_in}, shape)) node->save({q, k, v, out, lse});
  return y;
}

}  // namespace uoe::ops
