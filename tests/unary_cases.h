// The unary ops, one row each, shared by every table that tests an op (finite-difference gradients, CPU-vs-CUDA
// parity, the float64 references): adding a unary op to the tests is one row in tests/unary_cases.cpp.
#pragma once
#include <vector>

#include "core/tensor.h"
#include "gradcheck.h"

namespace uoe::testing {

struct UnaryCase {
  const char* name;
  Tensor (*fn)(const Tensor& x);
  double (*ref)(double x);      // the value in float64, from the definition
  bool positive = false;        // defined for x > 0 only
  bool differentiable = true;  // false: compared forward only
};

const std::vector<UnaryCase>& unary_cases();

// The rows as op cases on one input of `shape`; only the differentiable ones when `differentiable_only`.
std::vector<GradCase> unary_op_cases(const Shape& shape, bool differentiable_only);

// References shared with the derivative checks.
double sigmoid_ref(double x);
inline constexpr double kTanhC = 0.7978845608028654, kTanhA = 0.044715;  // sqrt(2/pi) and the cubic coefficient

}  // namespace uoe::testing
