// A small self-contained SVG line chart (no scripts, no external resources).
#pragma once
#include <string>
#include <vector>

namespace uoe::cli {

struct Series {
  std::string label;
  std::vector<double> x, y;
};

// Lines over shared axes with ticks, axis titles and a legend; colours by series index.
std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series);

}  // namespace uoe::cli
