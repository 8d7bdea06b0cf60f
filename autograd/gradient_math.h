// The tensor arithmetic that backward needs, passed in by the op layer: autograd computes no tensor values of its own,
// so it links below the ops (ops/backward.h hands the engine the op layer's arithmetic).
#pragma once
#include "core/tensor.h"

namespace uoe::autograd {

struct GradientMath {
  Tensor (*add)(const Tensor& a, const Tensor& b);  // gradients that meet at a node or a leaf, summed
  Tensor (*clone)(const Tensor& t);                 // a leaf's first gradient, copied into its .grad
  Tensor (*full)(const Shape& shape, double value, TensorOptions opt);  // the ones or zeros backward starts from
  bool (*all_finite)(const Tensor& t);  // anomaly mode's test: no NaN or Inf (true for non-floating dtypes)
};

}  // namespace uoe::autograd
