// Finite-difference gradient check: analytical backward vs central differences, in float64.
#include "ops/gradcheck.h"

#include <cmath>
#include <sstream>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/rng.h"
#include "ops/ops.h"

namespace uoe::gradcheck {

std::string Report::summary() const {
  std::ostringstream os;
  os << (passed ? "passed" : "FAILED");
  if (!problem.empty()) return os.str() + ": " + problem;
  os << ": " << elements << " elements, max abs error " << max_abs_error << ", max rel error " << max_rel_error
     << " (tolerance " << tolerance << "); worst: input " << worst_input << " element " << worst_element
     << ", analytic " << worst_analytic << " vs numeric " << worst_numeric;
  return os.str();
}

namespace {

// Float64 contiguous leaves requiring grad, copies of the inputs.
std::vector<Tensor> float64_leaves(const std::vector<Tensor>& inputs) {
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < inputs.size(); ++i) {
    UOE_CHECK(inputs[i].defined(), "[gradcheck::check_gradients] input ", i, " is undefined");
    UOE_CHECK(is_floating(inputs[i].dtype()), "[gradcheck::check_gradients] input ", i,
              " must be floating, got ", dtype_name(inputs[i].dtype()));
    UOE_CHECK(!inputs[i].is_cuda(), "[gradcheck::check_gradients] input ", i,
              " is on a GPU: the checker moves the inputs' elements from the host, so it needs CPU inputs");
    NoGradGuard no_grad;
    leaves.push_back(inputs[i].detach().to(DType::Float64).contiguous().clone().requires_grad_());
  }
  return leaves;
}

// Whether error a is worse than b, a NaN being the worst of all (and kept once found).
bool worse(double a, double b) { return !std::isnan(b) && (std::isnan(a) || a > b); }

}  // namespace

Report check_gradients(const Fn& fn, const std::vector<Tensor>& inputs, const Options& options) {
  Report report;
  report.tolerance = options.tolerance;
  std::vector<Tensor> leaves = float64_leaves(inputs);
  const Tensor out = fn(leaves);
  UOE_CHECK(out.defined(), "[gradcheck::check_gradients] fn returned an undefined tensor");
  Generator g(options.seed);
  const Tensor w = randn(out.shape(), TensorOptions{}.with_dtype(DType::Float64), &g);
  auto loss_of = [&](const Tensor& y) { return ops::sum(y.to(DType::Float64) * w); };
  loss_of(out).backward();

  const double h = options.step;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor analytic = leaves[i].grad();
    if (!analytic.defined()) {
      report.problem = "input " + std::to_string(i) + " received no gradient";
      return report;
    }
    const std::vector<double> ga = analytic.to_vector<double>();
    double* p = leaves[i].data_ptr<double>();
    for (int64_t k = 0; k < leaves[i].numel(); ++k) {
      NoGradGuard no_grad;
      const double orig = p[k];
      p[k] = orig + h;
      const double up = loss_of(fn(leaves)).item<double>();
      p[k] = orig - h;
      const double down = loss_of(fn(leaves)).item<double>();
      p[k] = orig;
      const double numeric = (up - down) / (2 * h), abs_err = std::fabs(numeric - ga[size_t(k)]);
      const double rel_err = abs_err / (1.0 + std::fabs(numeric));
      if (worse(abs_err, report.max_abs_error)) report.max_abs_error = abs_err;
      ++report.elements;
      if (report.worst_input < 0 || worse(rel_err, report.max_rel_error)) {
        report.max_rel_error = rel_err;
        report.worst_input = int64_t(i);
        report.worst_element = k;
        report.worst_analytic = ga[size_t(k)];
        report.worst_numeric = numeric;
      }
    }
  }
  report.passed = report.max_rel_error <= options.tolerance;  // NaN fails
  return report;
}

}  // namespace uoe::gradcheck
