// Finite-difference gradient check for any differentiable function of tensors: the gradient autograd computes
// against central differences, in float64. For a user's own op (examples/custom_op.cpp) as for the library's tests.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace uoe::gradcheck {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Options {
  double step = 1e-6;        // h of the central difference (f(x + h) - f(x - h)) / 2h
  double tolerance = 1e-6;   // largest error allowed, measured as |numeric - analytic| / (1 + |numeric|)
  uint64_t seed = 999;       // of the random weights w of the scalar loss sum(fn(inputs) * w)
};

// What check_gradients found: the worst element over every element of every input.
struct Report {
  bool passed = false;
  double tolerance = 0;
  double max_abs_error = 0;  // max |numeric - analytic|
  double max_rel_error = 0;  // max |numeric - analytic| / (1 + |numeric|): what `tolerance` bounds
  int64_t worst_input = -1, worst_element = -1;  // where max_rel_error is (flat index into that input)
  double worst_analytic = 0, worst_numeric = 0;
  int64_t elements = 0;  // how many elements were checked
  std::string problem;   // set when the check could not run as asked (e.g. an input received no gradient)
  // One line: "passed" or "FAILED", the errors and the worst element.
  std::string summary() const;
};

// Checks d(sum(fn(xs) * w))/d xs against central differences for every element of every input, w a fixed random
// weight shaped like fn's output. xs are float64 copies of `inputs` (made contiguous, requiring grad), so the
// caller's tensors are untouched and fn must accept float64. CPU tensors only. fn runs 2 * (total elements) + 1 times.
Report check_gradients(const Fn& fn, const std::vector<Tensor>& inputs, const Options& options = {});

}  // namespace uoe::gradcheck
