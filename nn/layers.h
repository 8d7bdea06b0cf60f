// Basic layers: Linear, Embedding, RMSNorm, SwiGLU feed-forward.
#pragma once
#include "nn/module.h"

namespace uoe::nn {

// Normal(0, std) initialisation from the default generator.
Tensor init_normal(const Shape& shape, double std);

// y = x W (+ b); W is [in, out] (input axis first), b is [out].
class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = false, double init_std = 0.02);
  Tensor forward(const Tensor& x) const;  // x: [..., in] -> [..., out]
  Tensor weight, bias;
};

// ids [...] -> [..., d]; weight [vocab, d].
class Embedding : public Module {
 public:
  Embedding(int64_t vocab, int64_t d, double init_std = 0.02);
  Tensor forward(const Tensor& ids) const;
  Tensor weight;
};

class RMSNorm : public Module {
 public:
  explicit RMSNorm(int64_t d, double eps = 1e-5);
  Tensor forward(const Tensor& x) const;  // over the last dim, scaled by weight [d] (init 1)
  Tensor weight;
  double eps;
};

// SwiGLU FFN: (silu(x W_g) ⊙ (x W_p)) W_o with W_g, W_p [d, hidden], W_o [hidden, d].
class SwiGLU : public Module {
 public:
  SwiGLU(int64_t d, int64_t hidden, double out_std);
  Tensor forward(const Tensor& x) const;  // x: [T, d] -> [T, d]
  std::shared_ptr<Linear> gate, up, down;
};

}  // namespace uoe::nn
