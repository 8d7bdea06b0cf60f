// Optimisers, schedule and clipping. Updates run in the fused kernels of the optimiser family
// (ops/kernels/optimizer.h) on each parameter's device (AdamW: one multi-tensor call per device and step, on a GPU
// as few launches as possible); optimiser state lives on its parameter's device.
#include "nn/optim.h"

#include <cmath>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/backend.h"
#include "ops/kernels/optimizer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

const Tensor& state_at(const std::map<std::string, Tensor>& state, const std::string& key, const Tensor& like) {
  auto it = state.find(key);
  UOE_CHECK(it != state.end(), "[optimizer] state is missing '", key, "'");
  UOE_CHECK(it->second.shape() == like.shape(), "[optimizer] state '", key, "' has shape ", shape_str(it->second.shape()),
            " but the parameter is ", shape_str(like.shape()));
  return it->second;
}

int64_t load_step(const std::map<std::string, Tensor>& state) {
  auto it = state.find("step");
  UOE_CHECK(it != state.end(), "[optimizer] state is missing 'step'");
  return it->second.item<int64_t>();
}

void check_update(const Tensor& p, const Tensor& g, const std::string& name) {
  UOE_CHECK((p.dtype() == DType::Float32 || p.dtype() == DType::BFloat16) && p.is_contiguous(), "[optimizer] parameter '",
            name, "' must be a contiguous float32 or bfloat16 tensor, got ", dtype_name(p.dtype()), shape_str(p.shape()));
  UOE_CHECK(g.shape() == p.shape(), "[optimizer] gradient of '", name, "' has shape ", shape_str(g.shape()));
  UOE_CHECK(g.dtype() == p.dtype(), "[optimizer] gradient of '", name, "' is ", dtype_name(g.dtype()),
            " but the parameter is ", dtype_name(p.dtype()));
  UOE_CHECK(g.device() == p.device(), "[optimizer] gradient of '", name, "' is on ", g.device().str(),
            " but the parameter is on ", p.device().str());
}

// Optimiser state beside its parameter, always float32 (also for bfloat16 parameters).
Tensor float_state(const Tensor& p) {
  return zeros(p.shape(), TensorOptions{}.with_dtype(DType::Float32).with_device(p.device()));
}

// The parameter and gradient buffers of one update as the kernels' element type P (float or BFloat16).
template <class P>
struct Buffers {
  P* p;
  const P* g;
};

// Calls body(Buffers<float>) or body(Buffers<BFloat16>) by the parameter's dtype.
template <class Body>
void with_buffers(const Tensor& p, const Tensor& g, const Body& body) {
  if (p.dtype() == DType::BFloat16) body(Buffers<BFloat16>{p.data_ptr<BFloat16>(), g.data_ptr<BFloat16>()});
  else body(Buffers<float>{p.data_ptr<float>(), g.data_ptr<float>()});
}

// The stochastic rounding of a bfloat16 parameter's update: keyed by the step and by each element's position in
// its storage, so that a ZeRO shard (a view at an offset into the parameter) rounds like the whole parameter.
kernels::RoundingKey rounding_key(const Tensor& p, int64_t step) { return {uint32_t(step), p.offset()}; }

// Σ t² of one tensor in float64 into *out (memory on t's device), without a float64 copy of it.
void squared_norm(const Tensor& t, double* out) {
  const Tensor c = t.contiguous();
  const ops::OnDevice on_device(c);
  switch (c.dtype()) {
    case DType::Float32: return UOE_KERNEL(c, squared_norm(c.data_ptr<float>(), c.numel(), out));
    case DType::Float64: return UOE_KERNEL(c, squared_norm(c.data_ptr<double>(), c.numel(), out));
    case DType::BFloat16: return UOE_KERNEL(c, squared_norm(c.data_ptr<BFloat16>(), c.numel(), out));
    default: fail("[global_norm] a tensor is ", dtype_name(c.dtype()), ": expected float32, float64 or bfloat16");
  }
}

// Σ t² over the defined `tensors`, added in their order: each tensor's sum lands in one float64 vector on their
// device, read back once (one synchronisation on a GPU, not one per tensor).
double sum_of_squares(const std::vector<Tensor>& tensors) {
  std::vector<Tensor> defined;
  for (const Tensor& t : tensors)
    if (t.defined()) defined.push_back(t);
  if (defined.empty()) return 0.0;
  const Device device = defined.front().device();
  Tensor parts = empty({int64_t(defined.size())}, TensorOptions{}.with_dtype(DType::Float64).with_device(device));
  for (size_t i = 0; i < defined.size(); ++i) {
    UOE_CHECK(defined[i].device() == device, "[global_norm] tensors on ", device.str(), " and ",
              defined[i].device().str(), ": expected one device");
    squared_norm(defined[i], parts.data_ptr<double>() + i);
  }
  double s = 0;
  for (double v : parts.to_vector<double>()) s += v;
  return s;
}

// The AdamW updates of the parameters on one device, run by one multi-tensor call.
struct DeviceUpdates {
  Tensor first;  // a parameter on the device (the call runs there)
  std::vector<kernels::AdamWTensor> tensors;
};

DeviceUpdates& updates_on(std::vector<DeviceUpdates>& all, const Tensor& param) {
  for (DeviceUpdates& u : all)
    if (u.first.device() == param.device()) return u;
  return all.emplace_back(DeviceUpdates{param, {}});
}

std::vector<Tensor> grads_of(const std::vector<Tensor>& params) {
  std::vector<Tensor> grads;
  for (const Tensor& p : params) grads.push_back(p.grad());
  return grads;
}

}  // namespace

bool decays_by_default(const std::string& name, const Tensor& p) {
  return p.dim() >= 2 && name.find("embed") == std::string::npos;
}

AdamW::AdamW(const NamedTensors& params, AdamWOptions opt) : opt_(opt) {
  for (const auto& [name, p] : params) slots_.push_back({name, p, float_state(p), float_state(p), decays_by_default(name, p)});
}

void AdamW::step(double lr) {
  ++steps_;
  const float bc1 = float(1.0 - std::pow(opt_.beta1, double(steps_)));
  const float bc2 = float(1.0 - std::pow(opt_.beta2, double(steps_)));
  // Parameters are gathered per device and updated by one multi-tensor call each (the contiguous gradients stay
  // alive until the updates are queued).
  std::vector<DeviceUpdates> updates;
  std::vector<Tensor> contiguous_grads;
  for (Slot& s : slots_) {
    const Tensor g = s.param.grad();
    if (!g.defined()) continue;
    check_update(s.param, g, s.name);
    const Tensor gc = g.contiguous();
    updates_on(updates, s.param)
        .tensors.push_back({s.param.raw_data(), gc.raw_data(), s.param.dtype() == DType::BFloat16, s.m.data_ptr<float>(),
                            s.v.data_ptr<float>(), s.param.numel(), s.decay ? float(opt_.weight_decay) : 0.0f,
                            rounding_key(s.param, steps_)});
    contiguous_grads.push_back(gc);
    s.param.bump_version();
  }
  const kernels::AdamWStep common{float(lr), float(opt_.beta1), float(opt_.beta2), float(opt_.eps), 0.0f, bc1, bc2};
  for (const DeviceUpdates& u : updates) {
    const ops::OnDevice on_device(u.first);
    UOE_KERNEL(u.first, adamw_update_multi(u.tensors, common));
  }
}

NamedTensors AdamW::state() const {
  NamedTensors out;
  for (const Slot& s : slots_) {
    out.emplace_back(s.name + ".exp_avg", s.m);
    out.emplace_back(s.name + ".exp_avg_sq", s.v);
  }
  out.emplace_back("step", scalar_tensor(double(steps_), TensorOptions{}.with_dtype(DType::Int64)));
  return out;
}

void AdamW::load_state(const std::map<std::string, Tensor>& state) {
  NoGradGuard no_grad;
  for (Slot& s : slots_) {
    s.m.copy_(state_at(state, s.name + ".exp_avg", s.m));
    s.v.copy_(state_at(state, s.name + ".exp_avg_sq", s.v));
  }
  steps_ = load_step(state);
}

SGD::SGD(const NamedTensors& params, double momentum, double weight_decay)
    : momentum_(momentum), weight_decay_(weight_decay) {
  for (const auto& [name, p] : params) slots_.push_back({name, p, float_state(p), decays_by_default(name, p)});
}

void SGD::step(double lr) {
  ++steps_;
  for (Slot& s : slots_) {
    const Tensor g = s.param.grad();
    if (!g.defined()) continue;
    check_update(s.param, g, s.name);
    const Tensor gc = g.contiguous();
    const ops::OnDevice on_device(s.param);
    with_buffers(s.param, gc, [&](auto b) {
      UOE_KERNEL(s.param, sgd_update(b.p, b.g, s.velocity.data_ptr<float>(), s.param.numel(), float(lr),
                                     float(momentum_), s.decay ? float(weight_decay_) : 0.0f,
                                     rounding_key(s.param, steps_)));
    });
    s.param.bump_version();
  }
}

NamedTensors SGD::state() const {
  NamedTensors out;
  for (const Slot& s : slots_) out.emplace_back(s.name + ".momentum", s.velocity);
  out.emplace_back("step", scalar_tensor(double(steps_), TensorOptions{}.with_dtype(DType::Int64)));
  return out;
}

void SGD::load_state(const std::map<std::string, Tensor>& state) {
  NoGradGuard no_grad;
  for (Slot& s : slots_) s.velocity.copy_(state_at(state, s.name + ".momentum", s.velocity));
  steps_ = load_step(state);
}

double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double max_lr, double min_lr) {
  if (warmup > 0 && step < warmup) return max_lr * double(step + 1) / double(warmup);
  if (total <= warmup) return max_lr;
  const double progress = std::min(1.0, double(step - warmup) / double(total - warmup));
  return min_lr + 0.5 * (max_lr - min_lr) * (1.0 + std::cos(M_PI * progress));
}

double global_norm(const std::vector<Tensor>& tensors, const std::vector<Tensor>& sharded, Communicator* group) {
  NoGradGuard no_grad;
  double sumsq = sum_of_squares(tensors);
  if (!sharded.empty() || group) {
    UOE_CHECK(group, "[global_norm] sharded tensors need the group that shares them");
    const Tensor part = from_vector<double>({sum_of_squares(sharded)}, {1});
    group->all_reduce(part);
    sumsq += part.item<double>();
  }
  return std::sqrt(sumsq);
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, const std::vector<Tensor>& sharded,
                      Communicator* group) {
  NoGradGuard no_grad;
  const double norm = global_norm(grads_of(params), grads_of(sharded), group);
  if (max_norm > 0 && std::isfinite(norm) && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    for (const std::vector<Tensor>* ps : {&params, &sharded})
      for (const Tensor& p : *ps) {
        Tensor g = p.grad();
        if (g.defined()) g.mul_(scale);
      }
  }
  return norm;
}

}  // namespace uoe::nn
