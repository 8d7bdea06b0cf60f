// Finite-difference gradient checks in double precision, shared by the op tests.
#pragma once
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace uoe::testing {

using OpFn = std::function<Tensor(const std::vector<Tensor>&)>;

enum class Layout { Contiguous, Strided };  // Strided: every input is a step-2 slice of a wider leaf

// One op case of the tables (gradient checks, CPU-vs-CUDA parity): fn on fresh random inputs of `shapes`.
struct GradCase {
  std::string name;
  std::vector<Shape> shapes;  // one per floating input
  OpFn fn;
  bool positive = false;  // inputs drawn from [0.5, 2) instead of N(0, 1)
  bool differentiable = true;  // false: compared forward only (integer outputs, sign)
};
// How gtest prints a case: its name, not its bytes.
void PrintTo(const GradCase& c, std::ostream* os);

// gradcheck::check_gradients (ops/gradcheck.h: central differences, h = 1e-6, every element of every input) on
// fresh random inputs of the case, laid out as `layout` asks. Returns "" or the case's name and the report of the
// worst element.
std::string check_gradients(const GradCase& c, Layout layout, uint64_t seed, double tol = 1e-6);

// The message of the uoe::Error that f throws, or "" when it throws none.
std::string error_of(const std::function<void()>& f);

// Expects `text` (an error message, a command's output) to contain `part`.
void expect_has(const std::string& text, const std::string& part);

// Expects f to throw a uoe::Error whose message contains every one of `parts`.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts);

// max |a - b| over all elements (compared in float64).
double max_abs_diff(const Tensor& a, const Tensor& b);

// Runs `fused` and `composed` on equal fresh float64 leaves of `shapes` (seeded by `seed`);
// expects the outputs and every input gradient (of sum(y * w), w random) within `tol`.
void expect_fused_equals_composed(const std::vector<Shape>& shapes, const OpFn& fused, const OpFn& composed,
                                  double tol = 1e-10, uint64_t seed = 100);

// Random float64 tensor (no grad) for tests.
Tensor random_double(const Shape& shape, uint64_t seed, bool positive = false);

}  // namespace uoe::testing
