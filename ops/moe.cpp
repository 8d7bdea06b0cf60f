// MoE ops (top-k / top-p routing, group_l2norm, router losses, expert_ffn): validation, forward, backward.
#include "ops/moe.h"

#include <memory>
#include <optional>
#include <string>

#include "autograd/node.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/moe.h"
#include "ops/op_utils.h"
#include "ops/ops.h"

namespace uoe::ops {
namespace {

template <typename T>
const T* cptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}
template <typename T>
T* mptr(const Tensor& t) {
  return t.defined() ? t.data_ptr<T>() : nullptr;
}

// Detached, contiguous, in the compute dtype (bf16 / f16 -> f32); undefined stays undefined.
Tensor prep(const Tensor& t) { return t.defined() ? compute_view(t).detach().contiguous() : Tensor(); }
Tensor restore(const Tensor& t, DType dtype) { return t.defined() ? restore_dtype(t, dtype) : Tensor(); }
TensorOptions int64_on(Device device) { return TensorOptions{}.with_dtype(DType::Int64).with_device(device); }

// The error for slot i of a [., K] slot tensor holding `value`, outside [-1, n).
[[noreturn]] void bad_slot(const char* op, const char* arg, int64_t i, int64_t K, int64_t value, int64_t n,
                           const std::string& shapes) {
  fail("[", op, "] ", arg, "[", i / K, ", ", i % K, "] = ", value,
       " is out of range: expert indices must lie in [0, ", n, ") or be -1 for an empty slot", shapes);
}

// int64 contiguous host copy of a [T, K] slot tensor, every value in [-1, n); the error names the position.
Tensor checked_slots(const char* op, const char* arg, const Tensor& indices, int64_t n, const std::string& shapes) {
  check_index(op, arg, indices);
  Tensor idx = indices.to(Device::cpu()).to(DType::Int64).contiguous();
  const int64_t* p = idx.data_ptr<int64_t>();
  const int64_t K = idx.size(1);
  for (int64_t i = 0; i < idx.numel(); ++i)
    if (p[i] < -1 || p[i] >= n) bad_slot(op, arg, i, K, p[i], n, shapes);
  return idx;
}

// The plan of an expert_ffn call on the device of its tensors: built on the host from a host copy of the
// indices, or on the GPU (cuda::plan_experts: the experts' row counts are the one copy to the host). It converts
// to the plan type of either backend (ops/kernels/moe.h), so one UOE_KERNEL call serves both.
struct ExpertRouting {
  std::optional<kernels::ExpertPlan> host;
  operator const kernels::ExpertPlan&() const { return *host; }
  std::optional<kernels::DeviceExpertPlan> device;
  operator const kernels::DeviceExpertPlan&() const { return *device; }
  int64_t rows() const { return host ? host->rows() : device->rows(); }  // the (token, slot) pairs routed
};

std::shared_ptr<const ExpertRouting> plan_routing(const Tensor& indices, const kernels::ExpertShape& s,
                                                  const std::string& shapes) {
  const char* op = "expert_ffn";
  auto routing = std::make_shared<ExpertRouting>();
  if (indices.is_cuda()) {
    const Tensor idx = indices.to(DType::Int64).contiguous();
    routing->device = cuda::plan_experts(idx.data_ptr<int64_t>(), s.T, s.K, s.n);
    if (routing->device->bad_slot >= 0)
      bad_slot(op, "indices", routing->device->bad_slot, s.K, routing->device->bad_index, s.n, shapes);
    return routing;
  }
  const Tensor idx = checked_slots(op, "indices", indices, s.n, shapes);
  routing->host = cpu::plan_experts(idx.data_ptr<int64_t>(), s.T, s.K, s.n);
  return routing;
}

// ================================ routing ================================
// Forward: rank per token, softmax in double; backward: softmax Jacobian restricted to the selected experts.
struct RouteBackward final : autograd::Node {
  std::string op;
  kernels::RouteSpec spec;
  DType dtype;
  RouteBackward(std::string o, kernels::RouteSpec s, DType d) : op(std::move(o)), spec(s), dtype(d) {}
  std::string name() const override { return op; }
  std::vector<Tensor> apply(const Tensor& g_in) override {
    const Tensor idx = saved(0), w = saved(1), probs = saved(2);
    const OnDevice on_device(w);
    const Tensor g = prep(g_in);
    Tensor ds = empty({spec.T, spec.n}, like(w));  // [T, n]
    dispatch_float(w.dtype(), op.c_str(), [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(w, route_backward<T>(spec, idx.data_ptr<int64_t>(), w.data_ptr<T>(), cptr<T>(probs),
                                      g.data_ptr<T>(), ds.data_ptr<T>()));
    });
    return {restore(ds, dtype)};
  }
};

// scores: [T, n] -> indices, weights: [T, k]; p < 0 selects top-k.
Route route(const char* op, const Tensor& scores, int64_t k, double p, RouteWeights mode) {
  check_same_device(op, {scores});
  check_floating(op, "scores", scores);
  const OnDevice on_device(scores);
  UOE_CHECK(scores.dim() == 2, "[", op, "] scores must be [T, n], got ", shape_str(scores.shape()));
  const int64_t T = scores.size(0), n = scores.size(1);
  UOE_CHECK(k >= 1 && k <= n, "[", op, "] scores are [T, n] = ", shape_str(scores.shape()), ": ", p < 0 ? "k" : "max_k",
            " = ", k, " must lie in [1, n] = [1, ", n, "]");
  const bool full = mode == RouteWeights::FullSoftmax;
  const Tensor s = prep(scores);
  Tensor idx = empty({T, k}, int64_on(s.device())), w = empty({T, k}, like(s));
  Tensor probs = full ? empty({T, n}, like(s)) : Tensor();
  const kernels::RouteSpec spec{T, n, k, p, full};
  dispatch_float(s.dtype(), op, [&](auto tag) {
    using T_ = typename decltype(tag)::type;
    UOE_KERNEL(s, route_forward<T_>(spec, s.data_ptr<T_>(), idx.data_ptr<int64_t>(), w.data_ptr<T_>(),
                                    mptr<T_>(probs)));
  });
  Tensor weights = restore(w, scores.dtype());
  if (auto node = autograd::record<RouteBackward>(weights, {scores}, op, spec, scores.dtype())) {
    node->save({idx, w, probs});
    idx = idx.clone();  // the caller may edit its indices in place; the backward keeps the forward's choice
  }
  return {idx, weights};
}

// ================================ group_l2norm ================================
// A bfloat16 h with float32 norms is read as it is (the _bf16 kernels); any other pair computes on h's compute view.
bool l2norm_reads_bf16(DType h, DType norm) { return h == DType::BFloat16 && norm == DType::Float32; }

struct GroupL2NormBackward final : autograd::Node {
  int64_t groups;
  DType dtype;
  GroupL2NormBackward(int64_t g, DType d) : groups(g), dtype(d) {}
  std::string name() const override { return "group_l2norm"; }
  std::vector<Tensor> apply(const Tensor& g_in) override {
    const Tensor h = saved(0), norm = saved(1);  // h as the forward read it, norm in its compute dtype
    const OnDevice on_device(h);
    const Tensor g = prep(g_in);
    const int64_t width = h.size(-1), rows = width ? h.numel() / width : 0, r = width / groups;
    Tensor dh = empty(h.shape(), like(h));
    if (l2norm_reads_bf16(h.dtype(), norm.dtype())) {
      UOE_KERNEL(h, group_l2norm_backward_bf16(rows, groups, r, h.data_ptr<BFloat16>(), norm.data_ptr<float>(),
                                               g.data_ptr<float>(), dh.data_ptr<BFloat16>()));
    } else {
      dispatch_float(h.dtype(), "group_l2norm", [&](auto tag) {
        using T = typename decltype(tag)::type;
        UOE_KERNEL(h, group_l2norm_backward<T>(rows, groups, r, h.data_ptr<T>(), norm.data_ptr<T>(),
                                               g.data_ptr<T>(), dh.data_ptr<T>()));
      });
    }
    return {restore(dh, dtype)};
  }
};

// ================================ expert_ffn ================================
struct ExpertFfnBackward final : autograd::Node {
  kernels::ExpertShape shape;
  std::shared_ptr<const ExpertRouting> plan;
  DType dtype;
  ExpertFfnBackward(kernels::ExpertShape s, std::shared_ptr<const ExpertRouting> p, DType d)
      : shape(s), plan(std::move(p)), dtype(d) {}
  std::string name() const override { return "expert_ffn"; }
  // Inputs: x, indices, weights, W_gate, W_up, W_down, gate_input.
  std::vector<Tensor> apply(const Tensor& g_in) override {
    const Tensor x = saved(0), w = saved(1), wg = saved(2), wu = saved(3), wd = saved(4), gate = saved(5),
                 h = saved(6);
    const OnDevice on_device(x);
    const bool bf16 = x.dtype() == DType::BFloat16;  // saved in bfloat16: the bfloat16 kernels
    const Tensor g = bf16 ? g_in.to(DType::BFloat16).contiguous() : prep(g_in);  // [T, d]
    auto grad_if = [&](size_t i, const Tensor& like_t) {
      return next[i] && like_t.defined() ? empty(like_t.shape(), like(like_t)) : Tensor();
    };
    Tensor dx = grad_if(0, x), dw = grad_if(2, w), dwg = grad_if(3, wg), dwu = grad_if(4, wu), dwd = grad_if(5, wd),
           dgate = grad_if(6, gate);
    if (bf16) {
      using B = BFloat16;
      UOE_KERNEL(x, expert_ffn_backward_bf16(shape, *plan, x.data_ptr<B>(), cptr<B>(gate), w.data_ptr<B>(),
                                             wg.data_ptr<B>(), wu.data_ptr<B>(), wd.data_ptr<B>(), h.data_ptr<B>(),
                                             g.data_ptr<B>(), mptr<B>(dx), mptr<B>(dw), mptr<B>(dgate), mptr<B>(dwg),
                                             mptr<B>(dwu), mptr<B>(dwd)));
    } else {
      dispatch_float(x.dtype(), "expert_ffn", [&](auto tag) {
        using T = typename decltype(tag)::type;
        UOE_KERNEL(x, expert_ffn_backward<T>(shape, *plan, x.data_ptr<T>(), cptr<T>(gate), w.data_ptr<T>(),
                                             wg.data_ptr<T>(), wu.data_ptr<T>(), wd.data_ptr<T>(), h.data_ptr<T>(),
                                             g.data_ptr<T>(), mptr<T>(dx), mptr<T>(dw), mptr<T>(dgate),
                                             mptr<T>(dwg), mptr<T>(dwu), mptr<T>(dwd)));
      });
    }
    return {restore(dx, dtype),   Tensor(),
            restore(dw, dtype),   restore(dwg, dtype),
            restore(dwu, dtype),  restore(dwd, dtype),
            restore(dgate, dtype)};
  }
};

// Validates the expert_ffn arguments; returns the geometry (K, n, D, d_g filled in).
kernels::ExpertShape check_expert_ffn(const Tensor& x, const Tensor& indices, const Tensor& weights,
                                      const Tensor& wg, const Tensor& wu, const Tensor& wd, int64_t r0, int64_t r1,
                                      const Tensor& gate, std::string& shapes) {
  const char* op = "expert_ffn";
  if (gate.defined())
    check_same_device(op, {x, indices, weights, wg, wu, wd, gate});
  else
    check_same_device(op, {x, indices, weights, wg, wu, wd});
  shapes = " (x " + shape_str(x.shape()) + ", indices " + shape_str(indices.shape()) + ", weights " +
           shape_str(weights.shape()) + ", W_gate " + shape_str(wg.shape()) + ", W_up " + shape_str(wu.shape()) +
           ", W_down " + shape_str(wd.shape()) + ", gate_input " +
           (gate.defined() ? shape_str(gate.shape()) : std::string("undefined")) + ")";
  const std::string& all = shapes;
  check_floating(op, "x", x);
  check_index(op, "indices", indices);
  for (const Tensor* t : {&weights, &wg, &wu, &wd, &gate})
    if (t->defined()) check_same_dtype(op, x, *t);
  UOE_CHECK(x.dim() == 2, "[expert_ffn] x must be [T, d], got ", shape_str(x.shape()), all);
  const int64_t T = x.size(0), d = x.size(1);
  const std::string xs = "x is [T, d] = " + shape_str(x.shape());
  UOE_CHECK(indices.dim() == 2 && indices.size(0) == T, "[expert_ffn] ", xs, " but indices is ",
            shape_str(indices.shape()), ": indices must be [T, K] with T = ", T, all);
  const int64_t K = indices.size(1);
  UOE_CHECK(weights.shape() == indices.shape(), "[expert_ffn] indices is [T, K] = ", shape_str(indices.shape()),
            " but weights is ", shape_str(weights.shape()), ": weights must have the same shape", all);
  UOE_CHECK(wu.dim() == 3, "[expert_ffn] W_up must be [n, d, D], got ", shape_str(wu.shape()), all);
  const int64_t n = wu.size(0), D = wu.size(2);
  UOE_CHECK(wu.size(1) == d, "[expert_ffn] ", xs, " but W_up is ", shape_str(wu.shape()),
            ": W_up's dim 1 must equal d (", d, ")", all);
  const int64_t dg = gate.defined() && gate.dim() == 3 ? gate.size(2) : d;
  if (gate.defined())
    UOE_CHECK(gate.dim() == 3 && gate.size(0) == T && (gate.size(1) == n || gate.size(1) == 1), "[expert_ffn] ", xs,
              " and W_up is [n, d, D] = ", shape_str(wu.shape()), " but gate_input is ", shape_str(gate.shape()),
              ": it must be [T, n, d_g] = [", T, ", ", n, ", d_g] or [T, 1, d_g] = [", T, ", 1, d_g]", all);
  UOE_CHECK(wg.dim() == 3 && wg.size(0) == n && wg.size(1) == dg && wg.size(2) == D,
            "[expert_ffn] W_up is [n, d, D] = ", shape_str(wu.shape()), " but W_gate is ", shape_str(wg.shape()),
            ": W_gate must be [n, d_g, D] = [", n, ", ", dg, ", ", D,
            "] (d_g = ", gate.defined() ? "gate_input's last dim" : "d without gate_input", ")", all);
  UOE_CHECK(wd.dim() == 3 && wd.size(0) == n && wd.size(1) == D && wd.size(2) == d,
            "[expert_ffn] W_up is [n, d, D] = ", shape_str(wu.shape()), " but W_down is ", shape_str(wd.shape()),
            ": W_down must be [n, D, d] = [", n, ", ", D, ", ", d, "]", all);
  UOE_CHECK(0 <= r0 && r0 <= r1 && r1 <= D, "[expert_ffn] neuron range [r0, r1) = [", r0, ", ", r1,
            ") must satisfy 0 <= r0 <= r1 <= D = ", D, all);
  return {T, K, n, d, dg, D, r0, r1, gate.defined() && gate.size(1) == 1};
}

}  // namespace

Route topk_route(const Tensor& scores, int64_t k, RouteWeights mode) {
  return route("topk_route", scores, k, -1.0, mode);
}

Route topp_route(const Tensor& scores, double p, int64_t max_k, RouteWeights mode) {
  UOE_CHECK(p >= 0.0 && p <= 1.0, "[topp_route] p = ", p, " must lie in [0, 1] (scores ", shape_str(scores.shape()),
            ")");
  return route("topp_route", scores, max_k, p, mode);
}

Tensor group_l2norm(const Tensor& h, int64_t groups, std::optional<DType> norm_dtype) {
  check_same_device("group_l2norm", {h});
  check_floating("group_l2norm", "h", h);
  const DType out = norm_dtype.value_or(h.dtype());
  UOE_CHECK(is_floating(out), "[group_l2norm] norm_dtype must be a floating dtype, got ", dtype_name(out));
  const OnDevice on_device(h);
  UOE_CHECK(h.dim() >= 1, "[group_l2norm] h must be [..., groups*r], got ", shape_str(h.shape()));
  const int64_t width = h.size(-1);
  UOE_CHECK(groups >= 1 && width % groups == 0, "[group_l2norm] h is ", shape_str(h.shape()), ": its last dim ", width,
            " must split into groups = ", groups, " equal groups");
  const bool reads_bf16 = l2norm_reads_bf16(h.dtype(), out);
  const Tensor hc = reads_bf16 ? h.detach().contiguous() : prep(h);  // [rows, groups*r]
  Shape out_shape = h.shape();
  out_shape.back() = groups;
  Tensor norm = empty(out_shape, reads_bf16 ? like(hc).with_dtype(DType::Float32) : like(hc));
  const int64_t rows = width ? hc.numel() / width : shape_numel(out_shape) / groups, r = width / groups;
  if (reads_bf16) {
    UOE_KERNEL(hc, group_l2norm_forward_bf16(rows, groups, r, hc.data_ptr<BFloat16>(), norm.data_ptr<float>()));
  } else {
    dispatch_float(hc.dtype(), "group_l2norm", [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(hc, group_l2norm_forward<T>(rows, groups, r, hc.data_ptr<T>(), norm.data_ptr<T>()));
    });
  }
  Tensor y = restore(norm, out);
  if (auto node = autograd::record<GroupL2NormBackward>(y, {h}, groups, h.dtype())) node->save({hc, norm});
  return y;
}

namespace {

// counts[e]: the (token, slot) pairs of indices routed to expert e, int64 [n] on the indices' device. On the CPU the
// slots are checked first (one error naming the first bad one); a GPU counts without a copy to the host, leaving
// out slots outside [-1, n) (expert_ffn, which reads the same indices, reports them).
Tensor routed_counts(const char* op, const Tensor& indices, int64_t n, const std::string& shapes) {
  const Tensor idx =
      indices.is_cuda() ? indices.to(DType::Int64).contiguous() : checked_slots(op, "indices", indices, n, shapes);
  Tensor counts = empty({n}, TensorOptions{}.with_dtype(DType::Int64).with_device(indices.device()));
  UOE_KERNEL(idx, count_routed(idx.data_ptr<int64_t>(), idx.numel(), n, counts.data_ptr<int64_t>()));
  return counts;
}

// Reduced-float inputs of the auxiliary losses are computed in float32 (counts up to T·K, logsumexp).
DType loss_dtype(const Tensor& t) { return t.dtype() == DType::Float64 ? DType::Float64 : DType::Float32; }

}  // namespace

// The auxiliary losses are composed of primitive ops: their gradients are those ops' own, and on a GPU neither
// waits for the device.
Tensor load_balance_loss(const Tensor& probs, const Tensor& indices) {
  const char* op = "load_balance_loss";
  check_same_device(op, {probs, indices});
  check_floating(op, "probs", probs);
  check_index(op, "indices", indices);
  const OnDevice on_device(probs);
  const std::string shapes = " (probs " + shape_str(probs.shape()) + ", indices " + shape_str(indices.shape()) + ")";
  UOE_CHECK(probs.dim() == 2 && indices.dim() == 2 && probs.size(0) == indices.size(0),
            "[load_balance_loss] probs must be [T, n] and indices [T, K] with the same T", shapes);
  const int64_t T = probs.size(0), n = probs.size(1);
  const DType dt = loss_dtype(probs);
  const Tensor counts = routed_counts(op, indices, n, shapes).to(dt);  // [n]
  if (T == 0) return ops::sum(probs);  // 0
  // f_i = counts_i / total (all 0 when nothing is routed), P_i = mean_t probs[t, i]: n Σ_i f_i P_i
  const Tensor total = ops::sum(counts);
  const Tensor f = counts / (total + ops::eq(total, ops::scalar_like(0.0, total)).to(dt));
  return (ops::sum(ops::mean(probs.to(dt), {0}) * f) * double(n)).to(probs.dtype());
}

Tensor router_z_loss(const Tensor& logits) {
  check_floating("router_z_loss", "logits", logits);
  UOE_CHECK(logits.dim() >= 1, "[router_z_loss] logits must be [..., n], got ", shape_str(logits.shape()));
  if (logits.numel() == 0) return ops::sum(logits);  // 0
  // lse_t = m_t + log Σ_i exp(l_ti - m_t) with m_t = max_i l_ti, a shift that changes nothing (no gradient)
  const Tensor l = logits.to(loss_dtype(logits));
  const Tensor m = ops::max(l, -1, true).detach();                              // [..., 1]
  const Tensor lse = ops::log(ops::sum(ops::exp(l - m), {-1}, true)) + m;      // [..., 1]
  return ops::mean(lse * lse).to(logits.dtype());
}

std::array<Tensor, 3> padded_neuron_range(const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down, int64_t r0,
                                          int64_t r1, int64_t multiple) {
  const int64_t R = r1 - r0, padded = (R + multiple - 1) / multiple * multiple;
  auto range = [&](const Tensor& t, int64_t dim) {  // neurons [r0, r1) of t along dim, then zeros
    const Tensor slice = t.narrow(dim, r0, R);
    if (padded == R) return slice.contiguous();
    Shape zeros_shape = slice.shape();
    zeros_shape[size_t(dim)] = padded - R;
    return ops::cat({slice, zeros(zeros_shape, like(t))}, dim);
  };
  return {range(w_gate, 2), range(w_up, 2), range(w_down, 1)};
}

Tensor expert_ffn(const Tensor& x, const Tensor& indices, const Tensor& weights, const Tensor& w_gate,
                  const Tensor& w_up, const Tensor& w_down, int64_t r0, int64_t r1, const Tensor& gate_input) {
  std::string shapes;
  const kernels::ExpertShape s =
      check_expert_ffn(x, indices, weights, w_gate, w_up, w_down, r0, r1, gate_input, shapes);
  constexpr int64_t kAligned = 8;  // neurons: 16 bytes of bfloat16
  if (x.is_cuda() && (r0 % kAligned != 0 || (r1 - r0) % kAligned != 0)) {
    const auto [wg, wu, wd] = padded_neuron_range(w_gate, w_up, w_down, r0, r1, kAligned);
    return expert_ffn(x, indices, weights, wg, wu, wd, 0, wg.size(2), gate_input);
  }
  const OnDevice on_device(x);
  const std::shared_ptr<const ExpertRouting> plan = plan_routing(indices, s, shapes);
  // bfloat16 (on a GPU or the CPU): the bfloat16 kernels on the tensors as they are; otherwise float32 / float64
  // copies.
  const bool bf16 = x.dtype() == DType::BFloat16;
  auto in = [&](const Tensor& t) { return t.defined() ? (bf16 ? t : kernel_view(t)).detach().contiguous() : Tensor(); };
  const Tensor xc = in(x), wc = in(weights), wgc = in(w_gate), wuc = in(w_up), wdc = in(w_down), gc = in(gate_input);
  Tensor y = empty({s.T, s.d}, like(xc));  // [T, d]
  // H_g, H_p of every routed pair, kept for the backward when it will run (which then needs no GEMM to recompute
  // them)                                                                                          [2, P, R]
  const bool keep = autograd::needs_grad({x, indices, weights, w_gate, w_up, w_down, gate_input});
  const Tensor h = keep ? empty({2, plan->rows(), s.r1 - s.r0}, like(xc)) : Tensor();
  if (bf16) {
    using B = BFloat16;
    UOE_KERNEL(xc, expert_ffn_forward_bf16(s, *plan, xc.data_ptr<B>(), cptr<B>(gc), wc.data_ptr<B>(), wgc.data_ptr<B>(),
                                           wuc.data_ptr<B>(), wdc.data_ptr<B>(), y.data_ptr<B>(), mptr<B>(h)));
  } else {
    dispatch_float(xc.dtype(), "expert_ffn", [&](auto tag) {
      using T = typename decltype(tag)::type;
      UOE_KERNEL(xc, expert_ffn_forward<T>(s, *plan, xc.data_ptr<T>(), cptr<T>(gc), wc.data_ptr<T>(),
                                           wgc.data_ptr<T>(), wuc.data_ptr<T>(), wdc.data_ptr<T>(), y.data_ptr<T>(),
                                           mptr<T>(h)));
    });
  }
  y = restore(y, x.dtype());
  if (auto node = autograd::record<ExpertFfnBackward>(y, {x, indices, weights, w_gate, w_up, w_down, gate_input}, s,
                                                      plan, x.dtype()))
    node->save({xc, wc, wgc, wuc, wdc, gc, h});
  return y;
}

}  // namespace uoe::ops
