// SVG line chart.
#include "svg_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace uoe::cli {
namespace {

const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '<') out += "&lt;";
    else if (c == '>') out += "&gt;";
    else if (c == '&') out += "&amp;";
    else out += c;
  }
  return out;
}

std::string fmt(double v) {
  char buf[32];
  if (std::fabs(v) >= 1e6) std::snprintf(buf, sizeof buf, "%.3gM", v / 1e6);
  else if (std::fabs(v) >= 1e3) std::snprintf(buf, sizeof buf, "%.3gk", v / 1e3);
  else std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

}  // namespace

std::string line_chart_svg(const std::string& title, const std::string& x_label, const std::string& y_label,
                           const std::vector<Series>& series) {
  constexpr double W = 720, H = 440, L = 70, R = 170, T = 40, B = 55;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size(); ++i) {
      x0 = std::min(x0, s.x[i]);
      x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]);
      y1 = std::max(y1, s.y[i]);
    }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pad = (y1 - y0) * 0.05;
  y0 -= pad;
  y1 += pad;
  auto px = [&](double x) { return L + (x - x0) / (x1 - x0) * (W - L - R); };
  auto py = [&](double y) { return H - B - (y - y0) / (y1 - y0) * (H - T - B); };
  std::ostringstream o;
  o << "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"" << W << "\" height=\"" << H << "\" font-family=\"sans-serif\" font-size=\"12\">\n";
  o << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  o << "<text x=\"" << W / 2 << "\" y=\"22\" text-anchor=\"middle\" font-size=\"15\">" << escape(title) << "</text>\n";
  for (int i = 0; i <= 5; ++i) {
    const double xv = x0 + (x1 - x0) * i / 5, yv = y0 + (y1 - y0) * i / 5;
    o << "<line x1=\"" << px(xv) << "\" y1=\"" << T << "\" x2=\"" << px(xv) << "\" y2=\"" << H - B << "\" stroke=\"#eee\"/>\n";
    o << "<line x1=\"" << L << "\" y1=\"" << py(yv) << "\" x2=\"" << W - R << "\" y2=\"" << py(yv) << "\" stroke=\"#eee\"/>\n";
    o << "<text x=\"" << px(xv) << "\" y=\"" << H - B + 16 << "\" text-anchor=\"middle\">" << fmt(xv) << "</text>\n";
    o << "<text x=\"" << L - 6 << "\" y=\"" << py(yv) + 4 << "\" text-anchor=\"end\">" << fmt(yv) << "</text>\n";
  }
  o << "<rect x=\"" << L << "\" y=\"" << T << "\" width=\"" << W - L - R << "\" height=\"" << H - T - B
    << "\" fill=\"none\" stroke=\"#333\"/>\n";
  o << "<text x=\"" << (L + W - R) / 2 << "\" y=\"" << H - 15 << "\" text-anchor=\"middle\">" << escape(x_label) << "</text>\n";
  o << "<text transform=\"translate(18," << (T + H - B) / 2 << ") rotate(-90)\" text-anchor=\"middle\">" << escape(y_label)
    << "</text>\n";
  for (size_t s = 0; s < series.size(); ++s) {
    const char* colour = kColours[s % (sizeof kColours / sizeof kColours[0])];
    o << "<polyline fill=\"none\" stroke=\"" << colour << "\" stroke-width=\"2\" points=\"";
    for (size_t i = 0; i < series[s].x.size(); ++i) o << px(series[s].x[i]) << "," << py(series[s].y[i]) << " ";
    o << "\"/>\n";
    const double ly = T + 16 + 18 * double(s);
    o << "<line x1=\"" << W - R + 12 << "\" y1=\"" << ly - 4 << "\" x2=\"" << W - R + 32 << "\" y2=\"" << ly - 4
      << "\" stroke=\"" << colour << "\" stroke-width=\"2\"/>\n";
    o << "<text x=\"" << W - R + 38 << "\" y=\"" << ly << "\">" << escape(series[s].label) << "</text>\n";
  }
  o << "</svg>\n";
  return o.str();
}

}  // namespace uoe::cli
