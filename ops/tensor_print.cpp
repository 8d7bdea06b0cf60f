// PyTorch-like printing: nested brackets, abbreviated with "..." past 1000 elements, then shape, dtype, device, grad_fn.
#include <cmath>
#include <iomanip>
#include <sstream>

#include "autograd/node.h"
#include "core/tensor.h"

namespace uoe {
namespace {

constexpr int64_t kSummarizeAbove = 1000;
constexpr int64_t kEdgeItems = 3;

struct Printer {
  const std::vector<double>& values;
  const Shape& shape;
  bool floating, summarize, scientific;
  int width;

  std::string format(double v) const {
    std::ostringstream os;
    if (!floating) os << int64_t(v);
    else if (std::isnan(v)) os << "nan";
    else if (std::isinf(v)) os << (v > 0 ? "inf" : "-inf");
    else if (scientific) os << std::scientific << std::setprecision(4) << v;
    else os << std::fixed << std::setprecision(4) << v;
    std::string s = os.str();
    return std::string(size_t(std::max<int>(0, width - int(s.size()))), ' ') + s;
  }

  // Prints the sub-tensor at dim `d` starting at flat element `base` (row-major).
  void print(std::ostringstream& os, size_t d, int64_t base, int indent) const {
    if (d == shape.size()) {
      os << format(values[size_t(base)]);
      return;
    }
    int64_t inner = 1;
    for (size_t i = d + 1; i < shape.size(); ++i) inner *= shape[i];
    os << "[";
    const int64_t n = shape[d];
    for (int64_t i = 0; i < n; ++i) {
      if (summarize && n > 2 * kEdgeItems && i == kEdgeItems) {
        os << (d + 1 == shape.size() ? "..., " : "...,\n" + std::string(size_t(indent + 1), ' '));
        i = n - kEdgeItems - 1;
        continue;
      }
      print(os, d + 1, base + i * inner, indent + 1);
      if (i + 1 < n) os << (d + 1 == shape.size() ? ", " : ",\n" + std::string(d + 2 < shape.size() ? 1 : 0, '\n') +
                                                                std::string(size_t(indent + 1), ' '));
    }
    os << "]";
  }
};

}  // namespace

std::string Tensor::str() const {
  if (!defined()) return "tensor(undefined)";
  const std::vector<double> values = detach().to(DType::Float64).to_vector<double>();
  const bool floating = is_floating(dtype());
  double maxabs = 0, minabs = INFINITY;
  for (double v : values)
    if (std::isfinite(v)) {
      maxabs = std::max(maxabs, std::fabs(v));
      if (v != 0) minabs = std::min(minabs, std::fabs(v));
    }
  const bool scientific = floating && (maxabs >= 1e8 || (minabs < 1e-4 && minabs != INFINITY));
  Printer p{values, shape(), floating, numel() > kSummarizeAbove, scientific, 0};
  for (double v : values) p.width = std::max<int>(p.width, int(p.format(v).size()));
  std::ostringstream os;
  os << "tensor(";
  p.print(os, 0, 0, 7);
  os << ", shape=" << shape_str(shape()) << ", dtype=" << dtype_name(dtype());
  if (!is_cpu()) os << ", device=" << device().str();
  if (grad_fn()) os << ", grad_fn=<" << grad_fn()->name() << ">";
  else if (requires_grad()) os << ", requires_grad=True";
  os << ")";
  return os.str();
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) { return os << t.str(); }

}  // namespace uoe
