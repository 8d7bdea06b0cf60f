// SVG charts: well-formed, titled, one mark per datum where the geometry says so, and no NaN/inf for degenerate data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "analysis/svg_chart.h"
#include "core/error.h"
#include "xml_check.h"

namespace uoe::analysis {
namespace {

using test::check_xml;
using test::XmlCheck;

const double kNaN = std::nan("");

// Parses `svg`, failing the test when it is not one well-formed <svg> element with its (escaped) title.
XmlCheck checked(const std::string& svg, const std::string& title) {
  const XmlCheck c = check_xml(svg);
  EXPECT_EQ(c.error, "") << svg;
  EXPECT_FALSE(c.elements.empty());
  if (!c.elements.empty()) {
    EXPECT_EQ(c.elements[0].name, "svg");
    EXPECT_EQ(c.elements[0].attribute("xmlns"), "http://www.w3.org/2000/svg");
  }
  EXPECT_EQ(c.find("svg").size(), 1u);
  EXPECT_EQ(c.find("script").size(), 0u);
  EXPECT_EQ(svg.find("href"), std::string::npos);
  EXPECT_NE(svg.find(">" + escape_xml(title) + "<"), std::string::npos) << title;
  std::string lower = svg;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  EXPECT_EQ(lower.find("nan"), std::string::npos) << svg;
  EXPECT_EQ(lower.find("inf"), std::string::npos) << svg;
  return c;
}

double num(const test::XmlElement& e, const std::string& key) { return std::stod(e.attribute(key)); }

size_t point_count(const test::XmlElement& polyline) {
  std::istringstream in(polyline.attribute("points"));
  size_t n = 0;
  for (std::string pair; in >> pair;) ++n;
  return n;
}

TEST(SvgChart, LineChartDrawsOneLinePerSeriesSkippingNonFinitePoints) {
  const std::string title = "Loss <train & \"val\"> 'x'";
  const std::vector<Series> series = {{"train", {1, 2, 3, 4}, {3.2, 2.5, kNaN, 1.7}}, {"val", {2, 4}, {2.9, 2.1}}};
  const XmlCheck c = checked(line_chart_svg(title, "step", "loss", series), title);
  const auto lines = c.find("polyline", "class", "line");
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(point_count(lines[0]), 3u);
  EXPECT_EQ(point_count(lines[1]), 2u);
  EXPECT_EQ(lines[0].attribute("stroke"), palette_colour(0));
  EXPECT_EQ(lines[1].attribute("stroke"), palette_colour(1));
}

TEST(SvgChart, LineChartMarksEveryPointOfAShortSeriesInsideTheFrame) {
  // A run with few evaluations: each point is marked, and no marker is cut by the frame (x 80..550, y 40..385),
  // the first and last points included. A long series is a line alone.
  std::vector<double> long_x, long_y;
  for (int i = 0; i < 20; ++i) long_x.push_back(i), long_y.push_back(3.0 - 0.05 * i);
  const std::vector<Series> series = {
      {"train", {1, 2, 3}, {3.2, 2.5, 1.7}}, {"val", {1, 3}, {kNaN, 2.1}}, {"long", long_x, long_y}};
  const XmlCheck c = checked(line_chart_svg("Loss", "step", "loss", series), "Loss");
  const auto lines = c.find("polyline", "class", "line");
  const auto dots = c.find("circle", "class", "point");
  ASSERT_EQ(lines.size(), 3u);
  ASSERT_EQ(dots.size(), 4u) << "the 3 finite points of train and the one of val; none of the long series";
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(dots[i].attribute("fill"), palette_colour(0));
  EXPECT_EQ(dots[3].attribute("fill"), palette_colour(1));
  EXPECT_EQ(dots[3].attribute("cx") + "," + dots[3].attribute("cy") + " ", lines[1].attribute("points"));
  for (const auto& d : dots) {
    const double r = num(d, "r");
    EXPECT_GE(num(d, "cx") - r, 80.0) << d.attribute("cx");
    EXPECT_LE(num(d, "cx") + r, 550.0) << d.attribute("cx");
    EXPECT_GE(num(d, "cy") - r, 40.0) << d.attribute("cy");
    EXPECT_LE(num(d, "cy") + r, 385.0) << d.attribute("cy");
  }
}

TEST(SvgChart, GroupedBarsAreOneRectPerFiniteValueWithHeightsProportional) {
  const std::vector<Series> series = {{"layer 0", {}, {0.1, 0.3, 0.6}}, {"layer 1", {}, {0.2, kNaN, 0.4}}};
  const XmlCheck c = checked(
      bar_chart_svg("Expert load", "expert", "share", {"e0", "e1", "e2"}, series, false, 1.0 / 3), "Expert load");
  const auto bars = c.find("rect", "class", "bar");
  ASSERT_EQ(bars.size(), 5u);
  // in drawing order: category 0 (s0, s1), category 1 (s0), category 2 (s0, s1); heights scale with the values
  const double unit = num(bars[3], "height") / 0.6;  // pixels per 1.0, from the tallest bar (least rounding)
  const double expected[] = {0.1, 0.2, 0.3, 0.6, 0.4};
  for (size_t i = 0; i < 5; ++i) EXPECT_NEAR(num(bars[i], "height"), expected[i] * unit, 0.25) << i;
  EXPECT_LT(num(bars[0], "x"), num(bars[1], "x"));
  EXPECT_LT(num(bars[1], "x"), num(bars[2], "x"));
  EXPECT_EQ(bars[1].attribute("fill"), palette_colour(1));
  const auto reference = c.find("line", "class", "reference");
  ASSERT_EQ(reference.size(), 1u);
  // all bars stand on the same baseline; the reference sits at 1/3 of the unit above it
  const double baseline = num(bars[0], "y") + num(bars[0], "height");
  EXPECT_NEAR(num(reference[0], "y1"), baseline - unit / 3, 0.25);
  EXPECT_TRUE(checked(bar_chart_svg("No reference", "e", "s", {"a"}, {{"s", {}, {1}}}), "No reference")
                  .find("line", "class", "reference")
                  .empty());
}

TEST(SvgChart, StackedBarsSitOnEachOther) {
  const std::vector<Series> series = {{"a", {}, {2, 1}}, {"b", {}, {3, 4}}};
  const XmlCheck c = checked(bar_chart_svg("Stacked", "c", "v", {"x", "y"}, series, true), "Stacked");
  const auto bars = c.find("rect", "class", "bar");
  ASSERT_EQ(bars.size(), 4u);
  for (size_t cat = 0; cat < 2; ++cat) {
    const auto& low = bars[2 * cat];
    const auto& high = bars[2 * cat + 1];
    EXPECT_EQ(low.attribute("x"), high.attribute("x"));
    EXPECT_NEAR(num(high, "y") + num(high, "height"), num(low, "y"), 0.15);  // b starts where a ends
  }
  EXPECT_NEAR(num(bars[1], "height") / num(bars[0], "height"), 1.5, 0.01);
  EXPECT_NEAR(num(bars[3], "height") / num(bars[2], "height"), 4.0, 0.02);
  EXPECT_THROW(bar_chart_svg("t", "x", "y", {"one", "two"}, {{"s", {}, {1}}}), Error);
}

TEST(SvgChart, HistogramStepLinesFollowTheBins) {
  const std::vector<double> edges = {0, 0.5, 1, 1.5, 2};
  const std::vector<Series> series = {{"early", {}, {1, 4, 2, 0}}, {"late", {}, {0, 2, 5, kNaN}}};
  const XmlCheck c = checked(histogram_svg("Routing scores", "score", "count", edges, series), "Routing scores");
  const auto steps = c.find("polyline", "class", "step");
  ASSERT_EQ(steps.size(), 2u);
  for (const auto& s : steps) EXPECT_EQ(point_count(s), 2 + 2 * 4u);
  try {
    histogram_svg("t", "x", "y", edges, {{"bad", {}, {1, 2}}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("histogram_svg"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("'bad'"), std::string::npos) << e.what();
  }
  EXPECT_THROW(histogram_svg("t", "x", "y", {0, kNaN, 1}, {{"s", {}, {1, 2}}}), Error);
}

TEST(SvgChart, ScatterDrawsOneCirclePerFinitePoint) {
  const std::vector<Series> series = {{"moe", {1, 2, 3}, {0.5, kNaN, 0.7}}, {"uoe", {4, 5}, {0.9, 0.1}}};
  const XmlCheck c = checked(scatter_svg("Score vs load", "score", "load", series), "Score vs load");
  const auto points = c.find("circle", "class", "point");
  ASSERT_EQ(points.size(), 4u);
  EXPECT_LT(num(points[0], "cx"), num(points[1], "cx"));
  EXPECT_GT(num(points[0], "cy"), num(points[1], "cy"));  // 0.5 < 0.7: lower on the page means larger y
}

TEST(SvgChart, HeatmapColoursEveryCellBetweenLoAndHi) {
  const std::vector<std::string> rows = {"expert 0", "expert 1", "expert 2"};
  const std::vector<double> x = {10, 20, 30, 40, 50};
  std::vector<std::vector<double>> values = {
      {0, 0.1, 0.2, 0.3, 0.4}, {0.5, 0.6, 0.7, 0.8, 0.9}, {1, 1.5, -1, kNaN, 0.45}};
  const XmlCheck c = checked(heatmap_svg("Layer 0 load", "step", rows, x, values, 0, 1), "Layer 0 load");
  const auto cells = c.find("rect", "class", "cell");
  ASSERT_EQ(cells.size(), 15u);
  EXPECT_EQ(cells[0].attribute("fill"), "#ffffff");                    // lo
  EXPECT_EQ(cells[10].attribute("fill"), "#08306b");                   // hi
  EXPECT_EQ(cells[11].attribute("fill"), "#08306b");                   // above hi: clamped
  EXPECT_EQ(cells[12].attribute("fill"), "#ffffff");                   // below lo: clamped
  EXPECT_EQ(cells[13].attribute("fill"), "#cccccc");                   // NaN
  EXPECT_NE(cells[4].attribute("fill"), cells[14].attribute("fill"));  // 0.4 vs 0.45 differ
  EXPECT_LT(num(cells[0], "x"), num(cells[1], "x"));
  EXPECT_LT(num(cells[0], "y"), num(cells[5], "y"));
  EXPECT_FALSE(c.find("rect", "class", "colour-bar").empty());
  const std::string svg = heatmap_svg("Layer 0 load", "step", rows, x, values, 0, 1);
  for (const std::string& r : rows) EXPECT_NE(svg.find(">" + r + "<"), std::string::npos) << r;
  values[1].pop_back();
  EXPECT_THROW(heatmap_svg("t", "x", rows, x, values, 0, 1), Error);
}

TEST(SvgChart, CategoryHeatmapLabelsEveryColumnUnderItsCentre) {
  const std::vector<std::string> rows = {"layer 0", "layer 1"}, columns = {"e0", "e1", "e2", "e3", "e4", "e5", "e6"};
  const std::vector<std::vector<double>> values = {{0, 1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1, 0}};
  const std::string svg = category_heatmap_svg("Load", "expert", rows, columns, values, 0, 6);
  const XmlCheck c = checked(svg, "Load");
  const auto cells = c.find("rect", "class", "cell");
  ASSERT_EQ(cells.size(), 14u);
  EXPECT_EQ(cells[6].attribute("fill"), "#08306b");
  EXPECT_EQ(cells[7].attribute("fill"), "#08306b");
  for (size_t col = 0; col < columns.size(); ++col) {  // each label's x is its column's centre
    const size_t at = svg.find(">" + columns[col] + "<");
    ASSERT_NE(at, std::string::npos) << columns[col];
    const size_t x = svg.rfind(" x=\"", at) + 4;
    EXPECT_NEAR(std::stod(svg.substr(x)), num(cells[col], "x") + num(cells[col], "width") / 2, 0.6) << columns[col];
  }
  EXPECT_THROW(category_heatmap_svg("t", "x", rows, {"0", "1"}, values, 0, 1), Error);
}

TEST(SvgChart, TicksAreRoundNumbersWithShortLabels) {
  const std::string svg = line_chart_svg("Ticks", "tokens", "loss", {{"s", {1e5, 2e5, 3e5}, {0, 120, 300}}});
  checked(svg, "Ticks");
  for (const char* label : {">100k<", ">150k<", ">300k<", ">0<", ">50<", ">150<", ">300<"})
    EXPECT_NE(svg.find(label), std::string::npos) << label;
  EXPECT_EQ(svg.find("e+"), std::string::npos);
  const std::string small = scatter_svg("Small", "x", "y", {{"s", {0.001, 0.002}, {2.5e6, 2.6e6}}});
  for (const char* label : {">0.001<", ">0.0012<", ">0.002<", ">2.5M<", ">2.52M<", ">2.6M<"})
    EXPECT_NE(small.find(label), std::string::npos) << label;
}

TEST(SvgChart, DegenerateDataGiveValidChartsWithoutNaN) {
  const std::vector<std::vector<Series>> inputs = {
      {},
      {{"empty", {}, {}}},
      {{"constant", {1, 2, 3}, {5, 5, 5}}},
      {{"one point", {7}, {0}}},
      {{"all missing", {kNaN, kNaN}, {kNaN, kNaN}}},
      {{"huge", {-1e308, 1e308}, {1.7e308, -1.7e308}}},
      {{"tiny", {1e-300, 2e-300}, {4.9e-324, 1e-323}}},
      {{"unbounded", {0, 1, 2}, {INFINITY, 1, -INFINITY}}},
  };
  for (const std::vector<Series>& series : inputs) {
    const std::string what = series.empty() ? "no series" : series[0].label;
    SCOPED_TRACE(what);
    checked(line_chart_svg("Line " + what, "x", "y", series), "Line " + what);
    checked(scatter_svg("Scatter " + what, "x", "y", series), "Scatter " + what);
    std::vector<Series> bars;
    for (const Series& s : series) bars.push_back({s.label, {}, {s.y.empty() ? 0.0 : s.y[0]}});
    checked(bar_chart_svg("Bars " + what, "x", "y", {"c"}, bars, false, kNaN), "Bars " + what);
    checked(bar_chart_svg("Stacked " + what, "x", "y", {"c"}, bars, true, 1e308), "Stacked " + what);
  }
  const Series huge = {"huge", {}, {1.7e308, -1.7e308}};
  checked(bar_chart_svg("Stacks past the largest double", "x", "y", {"up", "down"}, {huge, huge}, true),
          "Stacks past the largest double");
  checked(bar_chart_svg("Bars without categories", "x", "y", {}, {}), "Bars without categories");
  checked(histogram_svg("Histogram without bins", "x", "y", {}, {}), "Histogram without bins");
  checked(histogram_svg("Constant histogram", "x", "y", {3, 3}, {{"s", {}, {0}}}), "Constant histogram");
  checked(heatmap_svg("Empty heatmap", "x", {}, {}, {}, 0, 0), "Empty heatmap");
  checked(heatmap_svg("Single cell", "x", {"r"}, {5}, {{2}}, 2, 2), "Single cell");
  checked(heatmap_svg("Bounds missing", "x", {"r"}, {kNaN}, {{1}}, kNaN, kNaN), "Bounds missing");
}

TEST(SvgChart, EscapedTextHasOnlyCharactersXmlAllows) {
  const std::string fffd = "\xEF\xBF\xBD";
  EXPECT_EQ(escape_xml("run\xff\xfe/x"), "run" + fffd + fffd + "/x");                       // not UTF-8
  EXPECT_EQ(escape_xml("a\xC3"), "a" + fffd);                                               // cut inside a character
  EXPECT_EQ(escape_xml("\xED\xA0\x80"), fffd + fffd + fffd);                                 // a surrogate
  EXPECT_EQ(escape_xml("\xEF\xBF\xBE\xEF\xBF\xBF\xEF\xBF\xBD"), fffd + fffd + fffd);        // U+FFFE, U+FFFF
  EXPECT_EQ(escape_xml("\xF0\x9F\x8E\x89 \xE2\x86\xB5"), "\xF0\x9F\x8E\x89 \xE2\x86\xB5");  // kept
  checked(line_chart_svg("t\xff<", "x\xEF\xBF\xBE", "y", {{"s\x80", {0, 1}, {0, 1}}}), "t\xff<");
}

TEST(SvgChart, EscapeAndPalette) {
  EXPECT_EQ(escape_xml("a<b>&\"c\"'d'\x01\te"), "a&lt;b&gt;&amp;&quot;c&quot;&#39;d&#39;\te");
  EXPECT_EQ(escape_xml("plain text é"), "plain text é");
  for (size_t i = 0; i < 10; ++i) {
    EXPECT_EQ(palette_colour(i), palette_colour(i + 10));
    EXPECT_EQ(palette_colour(i).size(), 7u);
    for (size_t j = 0; j < i; ++j) EXPECT_NE(palette_colour(i), palette_colour(j));
  }
}

}  // namespace
}  // namespace uoe::analysis
