// Small self-contained SVG charts (no scripts, no external resources) for reports and training views.
// Every chart is one <svg> element, well-formed XML, with its title drawn on top; colours by series index.
#pragma once
#include <limits>
#include <string>
#include <vector>

namespace uoe::analysis {

struct Series {
  std::string label;
  std::vector<double> x, y;
};

// Lines over shared axes with ticks, axis titles and a legend. Non-finite points are skipped; a series with one
// finite point is also drawn as a dot (a line of one point is invisible).
std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series);

// Grouped (or stacked) vertical bars: one group per category, one bar per series; series[s].y[c] is
// the value of series s in category c (series[s].x unused). A horizontal reference line at
// `reference` when it is finite (e.g. the uniform load 1/n).
std::string bar_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<std::string>& categories, const std::vector<Series>& series,
                          bool stacked = false, double reference = std::numeric_limits<double>::quiet_NaN());

// Histograms sharing bin edges (edges.size() == counts.size() + 1), drawn as overlaid step lines;
// series[s].y are the counts (or densities) of series s, series[s].x unused.
std::string histogram_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<double>& edges, const std::vector<Series>& series);

// Points (x[i], y[i]) per series, small circles.
std::string scatter_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                        const std::vector<Series>& series);

// values[row][col] as coloured cells (white -> dark blue between lo and hi), a colour bar with lo/hi,
// row labels on the left and column positions x[col] labelled on the bottom axis.
std::string heatmap_svg(const std::string& title, const std::string& x_label, const std::vector<std::string>& rows,
                        const std::vector<double>& x, const std::vector<std::vector<double>>& values, double lo,
                        double hi);

// The same with a label per column (e.g. experts), centred under it.
std::string category_heatmap_svg(const std::string& title, const std::string& x_label,
                                 const std::vector<std::string>& rows, const std::vector<std::string>& columns,
                                 const std::vector<std::vector<double>>& values, double lo, double hi);

// The categorical palette the charts use (also for colouring text by expert in reports).
const std::string& palette_colour(size_t index);

// Text with <, >, &, " and ' escaped for XML/HTML. Bytes that are not valid UTF-8, and U+FFFE and U+FFFF,
// become U+FFFD; control characters other than tab, LF and CR are dropped (XML 1.0 allows none of them).
std::string escape_xml(const std::string& s);

}  // namespace uoe::analysis
