// Basic layers: forward passes written with ops (autograd records them).
#include "nn/layers.h"

#include "ops/ops.h"

namespace uoe::nn {

Tensor init_normal(const Shape& shape, double std) { return randn(shape) * std; }

Linear::Linear(int64_t in, int64_t out, bool has_bias, double init_std) {
  weight = register_parameter("weight", init_normal({in, out}, init_std));
  if (has_bias) bias = register_parameter("bias", zeros({out}));
}

Tensor Linear::forward(const Tensor& x) const {
  // Weights are cast to the activations' dtype (bf16 compute over float32 master weights).
  Tensor y = ops::matmul(x, weight.to(x.dtype()));  // [..., in] @ [in, out] -> [..., out]
  return bias.defined() ? y + bias.to(x.dtype()) : y;
}

Embedding::Embedding(int64_t vocab, int64_t d, double init_std) {
  weight = register_parameter("weight", init_normal({vocab, d}, init_std));
}

Tensor Embedding::forward(const Tensor& ids) const { return ops::embedding(weight, ids); }

RMSNorm::RMSNorm(int64_t d, double e) : eps(e) { weight = register_parameter("weight", ones({d})); }

Tensor RMSNorm::forward(const Tensor& x) const { return ops::rms_norm(x, weight.to(x.dtype()), eps); }

SwiGLU::SwiGLU(int64_t d, int64_t hidden, double out_std) {
  gate = register_module("gate", std::make_shared<Linear>(d, hidden));
  up = register_module("up", std::make_shared<Linear>(d, hidden));
  down = register_module("down", std::make_shared<Linear>(hidden, d, false, out_std));
}

Tensor SwiGLU::forward(const Tensor& x) const {
  return down->forward(ops::swiglu(gate->forward(x), up->forward(x)));  // [T, hidden] -> [T, d]
}

}  // namespace uoe::nn
