// The unary op rows (see unary_cases.h).
#include "unary_cases.h"

#include <algorithm>
#include <cmath>

#include "ops/ops.h"

namespace uoe::testing {

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

namespace {

double gelu_ref(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double gelu_tanh_ref(double x) { return 0.5 * x * (1 + std::tanh(kTanhC * (x + kTanhA * x * x * x))); }

}  // namespace

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> rows = {
      {"neg", ops::neg, [](double x) { return -x; }},
      {"exp", ops::exp, [](double x) { return std::exp(x); }},
      {"log", ops::log, [](double x) { return std::log(x); }, true},
      {"sqrt", ops::sqrt, [](double x) { return std::sqrt(x); }, true},
      {"rsqrt", ops::rsqrt, [](double x) { return 1 / std::sqrt(x); }, true},
      {"abs", ops::abs, [](double x) { return std::fabs(x); }},
      {"sign", ops::sign, [](double x) { return double((x > 0) - (x < 0)); }, false, false},
      {"tanh", ops::tanh, [](double x) { return std::tanh(x); }},
      {"sigmoid", ops::sigmoid, sigmoid_ref},
      {"relu", ops::relu, [](double x) { return std::max(x, 0.0); }},
      {"gelu", [](const Tensor& x) { return ops::gelu(x); }, gelu_ref},
      {"gelu_tanh", [](const Tensor& x) { return ops::gelu(x, true); }, gelu_tanh_ref},
      {"silu", ops::silu, [](double x) { return x * sigmoid_ref(x); }},
      {"softplus", ops::softplus, [](double x) { return std::log1p(std::exp(x)); }},
  };
  return rows;
}

std::vector<GradCase> unary_op_cases(const Shape& shape, bool differentiable_only) {
  std::vector<GradCase> out;
  for (const UnaryCase& u : unary_cases()) {
    if (differentiable_only && !u.differentiable) continue;
    const auto fn = u.fn;
    out.push_back({u.name, {shape}, [fn](const std::vector<Tensor>& x) { return fn(x[0]); }, u.positive, u.differentiable});
  }
  return out;
}

}  // namespace uoe::testing
