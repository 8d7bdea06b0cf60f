// SVG charts: line, bar, histogram, scatter and heatmap, drawn over one shared frame (axes, ticks, legend).
#include "analysis/svg_chart.h"

#include <algorithm>
#include <array>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

#include "core/error.h"
#include "core/utf8.h"

namespace uoe::analysis {
namespace {

// Canvas and plot area in pixels; the right margin holds the legend (or the heatmap's colour bar).
constexpr double kWidth = 720, kHeight = 440, kLeft = 80, kRight = 170, kTop = 40, kBottom = 55;
constexpr double kPlotRight = kWidth - kRight, kPlotBottom = kHeight - kBottom;
constexpr size_t kMaxCategoryLabels = 24;  // more categories (or heatmap rows) get every k-th label

// A pixel coordinate with one decimal: short, and the same text on every platform.
std::string px(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", v);
  return buf;
}

// The finite values seen so far.
struct Extent {
  double lo = INFINITY, hi = -INFINITY;
  void include(double v) {
    if (!std::isfinite(v)) return;
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  void include(const std::vector<double>& vs) {
    for (double v : vs) include(v);
  }
};

// v clamped to the largest finite doubles.
double finite(double v) { return std::clamp(v, -DBL_MAX, DBL_MAX); }

// A linear map from data [lo, hi] to pixels [p0, p1]. Never degenerate: nothing finite gives [0, 1] and a
// constant c (or a span too small to divide by) gives c ± 10% (± 1 for 0). Works on halves so that even
// ±1e308 data do not overflow.
class Scale {
 public:
  Scale(Extent e, double p0, double p1) : p0_(p0), p1_(p1) {
    constexpr double kMinHalfSpan = 1e-300;
    if (!(e.lo <= e.hi)) e = {0, 1};
    if (!(e.hi * 0.5 - e.lo * 0.5 >= kMinHalfSpan)) {
      const double centre = e.lo * 0.5 + e.hi * 0.5;
      const double d = centre == 0 ? 1 : std::max(std::fabs(centre) * 0.1, kMinHalfSpan);
      e = {finite(centre - d), finite(centre + d)};
    }
    lo_ = e.lo;
    hi_ = e.hi;
  }
  // Widens the range by a fraction of its span on the low and the high side.
  Scale padded(double low_fraction, double high_fraction) const {
    return Scale(
        Extent{finite(lo_ - half_span() * (2 * low_fraction)), finite(hi_ + half_span() * (2 * high_fraction))}, p0_,
        p1_);
  }
  double operator()(double v) const { return p0_ + (v * 0.5 - lo_ * 0.5) / half_span() * (p1_ - p0_); }
  double lo() const { return lo_; }
  double hi() const { return hi_; }
  double half_span() const { return hi_ * 0.5 - lo_ * 0.5; }

 private:
  double lo_ = 0, hi_ = 1, p0_, p1_;
};

Extent extent_of(const std::vector<Series>& series, std::vector<double> Series::*member) {
  Extent e;
  for (const Series& s : series) e.include(s.*member);
  return e;
}

// A tick label precise enough to tell ticks `step` apart: 0.25, 1.5k, 3M, 2e-05.
std::string tick_label(double v, double step) {
  if (std::fabs(v) < step * 1e-6) return "0";
  struct Unit {
    double scale;
    const char* suffix;
  };
  static constexpr std::array<Unit, 4> kUnits = {{{1e9, "G"}, {1e6, "M"}, {1e3, "k"}, {1, ""}}};
  Unit unit = kUnits.back();  // 1e12 and above: plain exponent notation
  for (const Unit& u : kUnits)
    if (std::fabs(v) >= u.scale) {
      if (std::fabs(v) < u.scale * 1e3) unit = u;
      break;
    }
  // significant digits down to the step's decade, and at least the integer digits of the scaled value
  auto decade = [](double x) { return int(std::floor(std::log10(std::fabs(x)))); };
  const int digits = std::clamp(std::max(decade(v) - decade(step), decade(v / unit.scale)) + 1, 1, 15);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*g%s", digits, v / unit.scale, unit.suffix);
  return buf;
}

struct Tick {
  double at;  // pixel position along its axis
  std::string label;
  bool grid;  // draw a light grid line across the plot
};

// Round ticks (1, 2 or 5 times a power of ten) inside the scale's range.
std::vector<Tick> numeric_ticks(const Scale& s) {
  const double raw = s.half_span() * 0.4;  // about five intervals
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  const double ratio = raw / magnitude;
  const double step = magnitude * (ratio < 1.5 ? 1 : ratio < 3.5 ? 2 : ratio < 7.5 ? 5 : 10);
  std::vector<Tick> ticks;
  const double first = std::ceil(s.lo() / step);
  for (int k = 0; k < 20; ++k) {
    const double v = (first + k) * step;
    if (v - step * 1e-9 > s.hi()) break;  // also stops at overflow to inf
    ticks.push_back({s(v), tick_label(v, step), true});
  }
  return ticks;
}

// One label per category at pixel centre(i), thinned to at most kMaxCategoryLabels.
template <typename Centre>
std::vector<Tick> category_ticks(const std::vector<std::string>& labels, Centre centre) {
  const size_t stride = (labels.size() + kMaxCategoryLabels - 1) / kMaxCategoryLabels;
  std::vector<Tick> ticks;
  for (size_t i = 0; i < labels.size(); i += stride) ticks.push_back({centre(i), labels[i], false});
  return ticks;
}

// Opens the <svg> and draws the background, title, grid, tick labels, the plot frame and the axis titles.
void draw_frame(std::ostringstream& o, const std::string& title, const std::string& x_label, const std::string& y_label,
                const std::vector<Tick>& x_ticks, const std::vector<Tick>& y_ticks) {
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << kWidth << "\" height=\"" << kHeight
    << "\" viewBox=\"0 0 " << kWidth << " " << kHeight << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << kWidth / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << escape_xml(title)
    << "</text>\n";
  for (const Tick& t : x_ticks) {
    if (t.grid)
      o << "<line x1=\"" << px(t.at) << "\" y1=\"" << kTop << "\" x2=\"" << px(t.at) << "\" y2=\"" << kPlotBottom
        << "\" stroke=\"#eee\"/>\n";
    o << "<text x=\"" << px(t.at) << "\" y=\"" << kPlotBottom + 16 << "\" text-anchor=\"middle\">"
      << escape_xml(t.label) << "</text>\n";
  }
  for (const Tick& t : y_ticks) {
    if (t.grid)
      o << "<line x1=\"" << kLeft << "\" y1=\"" << px(t.at) << "\" x2=\"" << kPlotRight << "\" y2=\"" << px(t.at)
        << "\" stroke=\"#eee\"/>\n";
    o << "<text x=\"" << kLeft - 6 << "\" y=\"" << px(t.at + 4) << "\" text-anchor=\"end\">" << escape_xml(t.label)
      << "</text>\n";
  }
  o << "<rect x=\"" << kLeft << "\" y=\"" << kTop << "\" width=\"" << kPlotRight - kLeft << "\" height=\""
    << kPlotBottom - kTop << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << (kLeft + kPlotRight) / 2 << "\" y=\"" << kHeight - 15 << "\" text-anchor=\"middle\">"
    << escape_xml(x_label) << "</text>\n";
  o << "<text transform=\"translate(16," << (kTop + kPlotBottom) / 2 << ") rotate(-90)\" text-anchor=\"middle\">"
    << escape_xml(y_label) << "</text>\n";
}

enum class Swatch { Line, Box, Dot };

// Series labels in the right margin, each beside a swatch of its palette colour.
void draw_legend(std::ostringstream& o, const std::vector<Series>& series, Swatch swatch) {
  const double x = kPlotRight + 12;
  for (size_t s = 0; s < series.size(); ++s) {
    const double y = kTop + 16 + 18 * double(s);
    const std::string& colour = palette_colour(s);
    if (swatch == Swatch::Line)
      o << "<line x1=\"" << x << "\" y1=\"" << y - 4 << "\" x2=\"" << x + 20 << "\" y2=\"" << y - 4 << "\" stroke=\""
        << colour << "\" stroke-width=\"2\"/>\n";
    else if (swatch == Swatch::Box)
      o << "<rect x=\"" << x + 4 << "\" y=\"" << y - 10 << "\" width=\"12\" height=\"12\" fill=\"" << colour
        << "\"/>\n";
    else
      o << "<circle cx=\"" << x + 10 << "\" cy=\"" << y - 4 << "\" r=\"4\" fill=\"" << colour << "\"/>\n";
    o << "<text x=\"" << x + 26 << "\" y=\"" << y << "\">" << escape_xml(series[s].label) << "</text>\n";
  }
}

std::string finish(std::ostringstream& o) {
  o << "</svg>\n";
  return o.str();
}

// The points of a series with both coordinates finite.
template <typename Visit>
void for_each_finite_point(const Series& s, Visit visit) {
  for (size_t i = 0; i < std::min(s.x.size(), s.y.size()); ++i)
    if (std::isfinite(s.x[i]) && std::isfinite(s.y[i])) visit(s.x[i], s.y[i]);
}

// "#rrggbb" between white (t = 0) and dark blue #08306b (t = 1).
std::string heat_colour(double t) {
  t = std::clamp(t, 0.0, 1.0);
  auto channel = [t](int to) { return int(std::lround(255 + (to - 255) * t)); };
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", channel(0x08), channel(0x30), channel(0x6b));
  return buf;
}

}  // namespace

const std::string& palette_colour(size_t index) {
  static const std::array<std::string, 10> kPalette = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                                                       "#8c564b", "#e377c2", "#17becf", "#7f7f7f", "#bcbd22"};
  return kPalette[index % kPalette.size()];
}

std::string escape_xml(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t len = utf8_length(s, i);
    // U+FFFE and U+FFFF are valid UTF-8 but, like malformed bytes, not characters XML 1.0 allows
    const bool nonchar = len == 3 && s.compare(i, 2, "\xEF\xBF") == 0 && static_cast<unsigned char>(s[i + 2]) >= 0xBE;
    if (len == 0 || nonchar) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += std::max<size_t>(len, 1);
      continue;
    }
    if (len > 1) {
      out.append(s, i, len);
      i += len;
      continue;
    }
    const char c = s[i++];
    const char* entity = c == '<'    ? "&lt;"
                         : c == '>'  ? "&gt;"
                         : c == '&'  ? "&amp;"
                         : c == '"'  ? "&quot;"
                         : c == '\'' ? "&#39;"
                                     : nullptr;
    if (entity)
      out += entity;
    else if (static_cast<unsigned char>(c) >= 0x20 || c == '\t' || c == '\n' || c == '\r')
      out += c;  // XML 1.0 allows no other control characters: they are dropped
  }
  return out;
}

std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series) {
  // Both axes padded, so that the first and last points (a marker's whole circle) lie inside the frame.
  const Scale sx = Scale(extent_of(series, &Series::x), kLeft, kPlotRight).padded(0.02, 0.02);
  const Scale sy = Scale(extent_of(series, &Series::y), kPlotBottom, kTop).padded(0.05, 0.05);
  constexpr size_t kMarkedPoints = 12;  // a line of this many points or fewer marks each (few evaluations)
  std::ostringstream o;
  draw_frame(o, title, x_label, y_label, numeric_ticks(sx), numeric_ticks(sy));
  for (size_t s = 0; s < series.size(); ++s) {
    std::vector<std::pair<std::string, std::string>> xy;
    std::string points;
    for_each_finite_point(series[s], [&](double x, double y) {
      xy.emplace_back(px(sx(x)), px(sy(y)));
      points += xy.back().first + "," + xy.back().second + " ";
    });
    if (!xy.empty())
      o << "<polyline class=\"line\" fill=\"none\" stroke=\"" << palette_colour(s) << "\" stroke-width=\"2\" points=\""
        << points << "\"/>\n";
    if (xy.size() <= kMarkedPoints)  // a line of one point draws nothing, and a few points read better marked
      for (const auto& [x, y] : xy)
        o << "<circle class=\"point\" cx=\"" << x << "\" cy=\"" << y << "\" r=\"3\" fill=\"" << palette_colour(s)
          << "\"/>\n";
  }
  draw_legend(o, series, Swatch::Line);
  return finish(o);
}

std::string bar_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<std::string>& categories, const std::vector<Series>& series, bool stacked,
                          double reference) {
  for (const Series& s : series)
    UOE_CHECK(s.y.size() == categories.size(), "[bar_chart_svg] series '", s.label, "' has ", s.y.size(),
              " values but there are ", categories.size(), " categories");
  // value range: 0, the reference, and each bar (stacked: the positive and negative sums per category)
  Extent e;
  e.include(0);
  e.include(reference);
  for (size_t c = 0; c < categories.size(); ++c) {
    double up = 0, down = 0;
    for (const Series& s : series) {
      const double v = std::isfinite(s.y[c]) ? s.y[c] : 0;
      if (stacked) {
        double& sum = v >= 0 ? up : down;
        sum = finite(sum + v);
      } else {
        e.include(v);
      }
    }
    e.include(up);
    e.include(down);
  }
  const Scale sy = Scale(e, kPlotBottom, kTop).padded(e.lo < 0 ? 0.05 : 0, 0.05);
  const double group = (kPlotRight - kLeft) / double(std::max<size_t>(categories.size(), 1));
  const double bar_width = stacked ? group * 0.7 : group * 0.8 / double(std::max<size_t>(series.size(), 1));
  std::ostringstream o;
  draw_frame(o, title, x_label, y_label,
             category_ticks(categories, [&](size_t c) { return kLeft + group * (double(c) + 0.5); }),
             numeric_ticks(sy));
  for (size_t c = 0; c < categories.size(); ++c) {
    double up = 0, down = 0;  // stacked: the tops of the positive and negative stacks so far
    for (size_t s = 0; s < series.size(); ++s) {
      const double v = series[s].y[c];
      if (!std::isfinite(v)) continue;
      double from = 0, to = v;
      if (stacked) {
        double& base = v >= 0 ? up : down;
        from = base;
        base = finite(base + v);  // a stack past the largest double stops there, as its extent does
        to = base;
      }
      const double left =
          stacked ? kLeft + group * (double(c) + 0.15) : kLeft + group * (double(c) + 0.1) + bar_width * double(s);
      const double top = std::min(sy(from), sy(to)), bottom = std::max(sy(from), sy(to));
      o << "<rect class=\"bar\" x=\"" << px(left) << "\" y=\"" << px(top) << "\" width=\"" << px(bar_width)
        << "\" height=\"" << px(bottom - top) << "\" fill=\"" << palette_colour(s) << "\"/>\n";
    }
  }
  if (std::isfinite(reference))
    o << "<line class=\"reference\" x1=\"" << kLeft << "\" y1=\"" << px(sy(reference)) << "\" x2=\"" << kPlotRight
      << "\" y2=\"" << px(sy(reference)) << "\" stroke=\"#333\" stroke-dasharray=\"6 4\"/>\n";
  draw_legend(o, series, Swatch::Box);
  return finish(o);
}

std::string histogram_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                          const std::vector<double>& edges, const std::vector<Series>& series) {
  for (size_t i = 0; i < edges.size(); ++i)
    UOE_CHECK(std::isfinite(edges[i]) && (i == 0 || edges[i] >= edges[i - 1]),
              "[histogram_svg] bin edges must be finite and ascending; edge ", i, " is ", edges[i]);
  for (const Series& s : series)
    UOE_CHECK(s.y.size() + 1 == edges.size(), "[histogram_svg] series '", s.label, "' has ", s.y.size(), " counts for ",
              edges.size(), " bin edges (expected one count fewer than edges)");
  Extent ex, ey;
  ex.include(edges);
  ey.include(0);
  ey.include(extent_of(series, &Series::y).hi);
  const Scale sx(ex, kLeft, kPlotRight);
  const Scale sy = Scale(ey, kPlotBottom, kTop).padded(0, 0.05);
  std::ostringstream o;
  draw_frame(o, title, x_label, y_label, numeric_ticks(sx), numeric_ticks(sy));
  for (size_t s = 0; s < series.size(); ++s) {
    if (series[s].y.empty()) continue;
    // the outline of the bars: up the first edge, across each bin, down the last edge; non-finite counts as 0
    std::string points = px(sx(edges.front())) + "," + px(sy(0)) + " ";
    for (size_t b = 0; b < series[s].y.size(); ++b) {
      const double h = std::isfinite(series[s].y[b]) ? sy(series[s].y[b]) : sy(0);
      points += px(sx(edges[b])) + "," + px(h) + " " + px(sx(edges[b + 1])) + "," + px(h) + " ";
    }
    points += px(sx(edges.back())) + "," + px(sy(0));
    o << "<polyline class=\"step\" fill=\"none\" stroke=\"" << palette_colour(s) << "\" stroke-width=\"2\" points=\""
      << points << "\"/>\n";
  }
  draw_legend(o, series, Swatch::Line);
  return finish(o);
}

std::string scatter_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                        const std::vector<Series>& series) {
  const Scale sx = Scale(extent_of(series, &Series::x), kLeft, kPlotRight).padded(0.05, 0.05);
  const Scale sy = Scale(extent_of(series, &Series::y), kPlotBottom, kTop).padded(0.05, 0.05);
  std::ostringstream o;
  draw_frame(o, title, x_label, y_label, numeric_ticks(sx), numeric_ticks(sy));
  for (size_t s = 0; s < series.size(); ++s)
    for_each_finite_point(series[s], [&](double x, double y) {
      o << "<circle class=\"point\" cx=\"" << px(sx(x)) << "\" cy=\"" << px(sy(y)) << "\" r=\"3\" fill=\""
        << palette_colour(s) << "\" fill-opacity=\"0.7\"/>\n";
    });
  draw_legend(o, series, Swatch::Dot);
  return finish(o);
}

namespace {

// The cells of values[row][col] in equal columns, with the given x ticks, row labels, and the colour bar.
std::string heatmap(const std::string& title, const std::string& x_label, const std::vector<std::string>& rows,
                    size_t n_cols, const std::vector<Tick>& x_ticks, const std::vector<std::vector<double>>& values,
                    double lo, double hi) {
  UOE_CHECK(values.size() == rows.size(), "[heatmap_svg] ", values.size(), " value rows for ", rows.size(),
            " row labels");
  for (size_t r = 0; r < values.size(); ++r)
    UOE_CHECK(values[r].size() == n_cols, "[heatmap_svg] row '", rows[r], "' has ", values[r].size(), " values for ",
              n_cols, " columns");
  const size_t n_rows = rows.size();
  const double col_width = (kPlotRight - kLeft) / double(std::max<size_t>(n_cols, 1));
  const double row_height = (kPlotBottom - kTop) / double(std::max<size_t>(n_rows, 1));
  Extent range;
  range.include(lo);
  range.include(hi);
  const Scale colour(range, 0, 1);  // value -> position between white and dark blue
  std::ostringstream o;
  draw_frame(o, title, x_label, "", x_ticks,
             category_ticks(rows, [&](size_t r) { return kTop + row_height * (double(r) + 0.5); }));
  for (size_t r = 0; r < n_rows; ++r)
    for (size_t c = 0; c < n_cols; ++c) {
      const double v = values[r][c];
      o << "<rect class=\"cell\" x=\"" << px(kLeft + col_width * double(c)) << "\" y=\""
        << px(kTop + row_height * double(r)) << "\" width=\"" << px(col_width) << "\" height=\"" << px(row_height)
        << "\" fill=\"" << (std::isfinite(v) ? heat_colour(colour(v)) : std::string("#cccccc")) << "\"/>\n";
    }
  // the colour bar: a column of bands from hi (top) to lo (bottom), labelled at both ends
  constexpr int kBands = 32;
  constexpr double kBarX = kPlotRight + 20, kBarWidth = 16;
  const double band = (kPlotBottom - kTop) / kBands;
  for (int b = 0; b < kBands; ++b)
    o << "<rect class=\"colour-bar\" x=\"" << kBarX << "\" y=\"" << px(kTop + band * b) << "\" width=\"" << kBarWidth
      << "\" height=\"" << px(band + 0.5) << "\" fill=\"" << heat_colour(1 - (b + 0.5) / kBands) << "\"/>\n";
  o << "<rect x=\"" << kBarX << "\" y=\"" << kTop << "\" width=\"" << kBarWidth << "\" height=\"" << kPlotBottom - kTop
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  const double label_step = colour.half_span() * 0.2;
  o << "<text x=\"" << kBarX + kBarWidth + 6 << "\" y=\"" << kTop + 10 << "\">" << tick_label(colour.hi(), label_step)
    << "</text>\n";
  o << "<text x=\"" << kBarX + kBarWidth + 6 << "\" y=\"" << kPlotBottom << "\">" << tick_label(colour.lo(), label_step)
    << "</text>\n";
  return finish(o);
}

}  // namespace

std::string heatmap_svg(const std::string& title, const std::string& x_label, const std::vector<std::string>& rows,
                        const std::vector<double>& x, const std::vector<std::vector<double>>& values, double lo,
                        double hi) {
  // columns are equally wide; the x axis puts x.front() and x.back() at the first and last column centres
  const size_t n_cols = x.size();
  Extent ex;
  if (n_cols > 0) {
    const double half = n_cols > 1 ? (x.back() - x.front()) / double(n_cols - 1) / 2 : 0.5;
    ex.include(x.front() - half);
    ex.include(x.back() + half);
  }
  return heatmap(title, x_label, rows, n_cols, numeric_ticks(Scale(ex, kLeft, kPlotRight)), values, lo, hi);
}

std::string category_heatmap_svg(const std::string& title, const std::string& x_label,
                                 const std::vector<std::string>& rows, const std::vector<std::string>& columns,
                                 const std::vector<std::vector<double>>& values, double lo, double hi) {
  const double col_width = (kPlotRight - kLeft) / double(std::max<size_t>(columns.size(), 1));
  return heatmap(title, x_label, rows, columns.size(),
                 category_ticks(columns, [&](size_t c) { return kLeft + col_width * (double(c) + 0.5); }), values, lo,
                 hi);
}

}  // namespace uoe::analysis
