// Every expert's activations on given tokens, for MoE, AoE and UoE layers alike.
#include "analysis/expert_activations.h"

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "ops/ops.h"

namespace uoe::analysis {
namespace {

// The expert weights of an expert layer, with AoE's factorised-gate projection [d, n·d_low] (null otherwise).
struct ExpertView {
  const nn::ExpertWeights* w = nullptr;
  const Tensor* gate_down = nullptr;
  int64_t d_low = 0;
};

ExpertView view_of(const nn::Ffn& ffn) {
  ExpertView v;
  if (const auto* m = dynamic_cast<const nn::MoeFfn*>(&ffn)) v.w = &m->w;
  if (const auto* u = dynamic_cast<const nn::UoeFfn*>(&ffn)) v.w = &u->w;
  if (const auto* a = dynamic_cast<const nn::AoeFfn*>(&ffn)) {
    v.w = &a->w;
    v.gate_down = &a->gate_down;
    v.d_low = a->cfg.d_low;
  }
  UOE_CHECK(v.w, "[expert_activations] the layer has no experts (dense FFN)");
  return v;
}

// hi < 0 becomes D; the range must lie inside [0, D). `op` names the caller in the error.
int64_t checked_end(const char* op, int64_t lo, int64_t hi, int64_t D) {
  if (hi < 0) hi = D;
  UOE_CHECK(0 <= lo && lo < hi && hi <= D, "[", op, "] neuron range [", lo, ", ", hi, ") is not inside [0, ", D, ")");
  return hi;
}

}  // namespace

Tensor expert_activations(const nn::Ffn& ffn, const Tensor& x, int64_t i, int64_t lo, int64_t hi) {
  NoGradGuard no_grad;
  const ExpertView v = view_of(ffn);
  const int64_t n = v.w->gate.size(0);
  UOE_CHECK(0 <= i && i < n, "[expert_activations] expert ", i, " is not inside [0, ", n, ")");
  hi = checked_end("expert_activations", lo, hi, v.w->gate.size(2));
  // g_i: the gate input (AoE: x W_down[i], [T, d_low]); h_i = silu(g_i W_gate[i]) ⊙ (x W_up[i])   [T, hi − lo]
  const Tensor g_in = v.gate_down ? ops::matmul(x, v.gate_down->narrow(1, i * v.d_low, v.d_low)) : x;
  return ops::swiglu(ops::matmul(g_in, v.w->gate.select(0, i).narrow(1, lo, hi - lo)),
                     ops::matmul(x, v.w->up.select(0, i).narrow(1, lo, hi - lo)));
}

Tensor expert_activation_norms(const nn::Ffn& ffn, const Tensor& x, int64_t lo, int64_t hi) {
  NoGradGuard no_grad;
  const ExpertView v = view_of(ffn);
  const int64_t n = v.w->gate.size(0);
  hi = checked_end("expert_activation_norms", lo, hi, v.w->gate.size(2));
  std::vector<Tensor> norms;
  for (int64_t i = 0; i < n; ++i) {
    const Tensor h = expert_activations(ffn, x, i, lo, hi);
    norms.push_back(ops::sqrt(ops::sum(h * h, {1})));  // [T]
  }
  return ops::stack(norms, 1);  // [T, n]
}

}  // namespace uoe::analysis
