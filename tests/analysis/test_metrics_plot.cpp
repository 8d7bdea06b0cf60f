// Training-time views: metrics.jsonl read back field by field, clear errors for bad lines, the charts and
// index.html written for a run, and `uoe plot` on hand-written and real runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <random>

#include "analysis/metrics_plot.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/json.h"
#include "fixtures.h"
#include "nn/config.h"
#include "xml_check.h"

namespace uoe::analysis {
namespace {

using test::check_xml;
using test::run_command;
using test::temp_dir;
using test::XmlCheck;

// A metrics.jsonl line as nn/trainer.cpp writes it; `load` per layer ({} = dense), val_loss when given.
json::Value metrics_line(int64_t step, double train_loss, const std::vector<std::vector<double>>& load,
                         std::optional<double> val_loss = std::nullopt) {
  json::Value m = json::Value::object();
  m["step"] = step;
  m["train_loss"] = train_loss;
  m["lr"] = 1e-3 * double(step) / 7;
  m["grad_norm"] = 0.5 + train_loss / 10;
  m["tokens"] = step * 128;
  m["tokens_per_s"] = 1000.0 + 13.0 * double(step);
  json::Value layers = json::Value::array();
  for (const std::vector<double>& fractions : load) {
    json::Value l = json::Value::object();
    if (!fractions.empty()) {
      json::Value f = json::Value::array();
      for (double v : fractions) f.push_back(v);
      l["load"] = f;
      l["balance"] = 1.0 + fractions[0];
    }
    layers.push_back(l);
  }
  m["layers"] = layers;
  if (val_loss) m["val_loss"] = *val_loss;
  return m;
}

// n random load fractions summing to 1.
std::vector<double> random_load(std::mt19937& rng, size_t n) {
  std::vector<double> f(n);
  double sum = 0;
  for (double& v : f) sum += (v = std::uniform_real_distribution<double>(0.05, 1)(rng));
  for (double& v : f) v /= sum;
  return f;
}

// A run directory with `steps` lines: layer 0 routed over `experts` experts, layer 1 dense (when routed);
// val_loss every 3rd step. Returns what was written, for comparison.
std::vector<json::Value> write_run(const std::string& dir, int64_t steps, bool routed, size_t experts = 4) {
  std::mt19937 rng(uint32_t(steps * 31 + experts));
  std::vector<json::Value> lines;
  std::string text;
  for (int64_t s = 1; s <= steps; ++s) {
    const double loss = 5.5 / double(s) + std::uniform_real_distribution<double>(0, 0.1)(rng);
    const std::vector<std::vector<double>> load = routed
                                                      ? std::vector<std::vector<double>>{random_load(rng, experts), {}}
                                                      : std::vector<std::vector<double>>{{}, {}};
    lines.push_back(metrics_line(s, loss, load, s % 3 == 0 ? std::optional<double>(loss + 0.25) : std::nullopt));
    text += lines.back().dump() + "\n";
    if (s == 2) text += "\n";  // empty lines are skipped
  }
  std::filesystem::create_directories(dir);
  write_file_atomic(dir + "/metrics.jsonl", text);
  return lines;
}

std::string error_of(const std::string& path) {
  try {
    read_metrics(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "no error";
}

TEST(MetricsPlot, ReadsEveryFieldOfEveryLine) {
  const std::string dir = temp_dir("metrics_read");
  const std::vector<json::Value> written = write_run(dir, 7, true, 5);
  const RunMetrics run = read_metrics(dir + "/metrics.jsonl");
  EXPECT_EQ(run.path, dir + "/metrics.jsonl");
  ASSERT_EQ(run.steps.size(), 7u);
  for (size_t i = 0; i < written.size(); ++i) {
    const StepMetrics& m = run.steps[i];
    const json::Value& w = written[i];
    EXPECT_EQ(m.step, w.at("step").as_int());
    EXPECT_EQ(m.tokens, w.at("tokens").as_int());
    EXPECT_EQ(m.train_loss, w.at("train_loss").as_double());
    EXPECT_EQ(m.lr, w.at("lr").as_double());
    EXPECT_EQ(m.grad_norm, w.at("grad_norm").as_double());
    EXPECT_EQ(m.tokens_per_s, w.at("tokens_per_s").as_double());
    EXPECT_EQ(m.val_loss.has_value(), w.contains("val_loss")) << i;
    if (m.val_loss) {
      EXPECT_EQ(*m.val_loss, w.at("val_loss").as_double());
    }
    ASSERT_EQ(m.load.size(), 2u);
    ASSERT_EQ(m.load[0].size(), 5u);
    for (size_t e = 0; e < 5; ++e)
      EXPECT_EQ(m.load[0][e], w.at("layers").as_array()[0].at("load").as_array()[e].as_double());
    EXPECT_EQ(m.balance[0], 1.0 + m.load[0][0]);
    EXPECT_TRUE(m.load[1].empty());
    EXPECT_FALSE(m.balance[1].has_value());
  }
}

TEST(MetricsPlot, BadLinesNameTheFileTheLineAndTheField) {
  const std::string dir = temp_dir("metrics_bad");
  const std::string good = metrics_line(1, 3.5, {{0.5, 0.5}}).dump();
  const std::string path = dir + "/metrics.jsonl";
  const std::pair<std::string, std::string> cases[] = {
      {"{\"step\": 2, ", ":3: [json]"},  // truncated JSON (line 2 is empty)
      {"[1, 2]", "expected a JSON object"},
      {R"({"step": 2, "tokens": 3, "train_loss": 1.5, "grad_norm": 1, "tokens_per_s": 9})", "\"lr\""},
      {R"({"step": 2, "tokens": 3, "train_loss": "x", "lr": 1, "grad_norm": 1, "tokens_per_s": 9})",
       "field \"train_loss\" must be a number, got string"},
      {R"({"step": 2.5, "tokens": 3, "train_loss": 1, "lr": 1, "grad_norm": 1, "tokens_per_s": 9})",
       "field \"step\" must be an integer"},
      {R"({"step": 2, "tokens": 3, "train_loss": 1, "lr": 1, "grad_norm": 1, "tokens_per_s": 9, "layers": [{"load": ["a"]}]})",
       "layers[0].load must hold numbers"},
      {R"({"step": 2, "tokens": 3, "train_loss": 1, "lr": 1, "grad_norm": 1, "tokens_per_s": 9, "layers": [{}, 7]})",
       "layers[1] must be an object"},
  };
  for (const auto& [bad, expected] : cases) {
    write_file_atomic(path, good + "\n\n" + bad + "\n" + good + "\n");
    const std::string e = error_of(path);
    EXPECT_NE(e.find(path + ":3: "), std::string::npos) << e;
    EXPECT_NE(e.find(expected), std::string::npos) << e;
  }
  EXPECT_NE(error_of(dir + "/missing.jsonl").find(dir + "/missing.jsonl"), std::string::npos);
}

TEST(MetricsPlot, WritesEveryChartAndAWellFormedIndex) {
  const std::string dir = temp_dir("metrics_write");
  write_run(dir, 9, true, 6);
  EXPECT_EQ(write_run_plots(dir), dir + "/plots");
  const std::vector<std::string> names = {"loss", "lr", "grad_norm", "tokens_per_s", "balance", "load_layer0"};
  for (const std::string& n : names) {
    const XmlCheck svg = check_xml(read_file_bytes(dir + "/plots/" + n + ".svg"));
    EXPECT_EQ(svg.error, "") << n;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/plots/load_layer1.svg"));  // the dense layer has no heatmap
  const std::string html = read_file_bytes(dir + "/plots/index.html");
  const XmlCheck page = check_xml(html);
  ASSERT_EQ(page.error, "") << html;
  EXPECT_NE(html.find("<meta charset=\"utf-8\"/>"), std::string::npos);
  EXPECT_EQ(page.find("svg").size(), names.size());
  EXPECT_EQ(page.find("figure").size(), names.size());
  for (const std::string& n : names) EXPECT_EQ(page.find("figure", "id", n).size(), 1u) << n;
  EXPECT_NE(html.find("9 steps"), std::string::npos);

  const XmlCheck loss = check_xml(read_file_bytes(dir + "/plots/loss.svg"));
  const auto lines = loss.find("polyline", "class", "line");
  ASSERT_EQ(lines.size(), 2u);  // train (9 points) and val (steps 3, 6, 9)
  const std::string train_points = lines[0].attribute("points"), val_points = lines[1].attribute("points");
  EXPECT_EQ(std::count(train_points.begin(), train_points.end(), ','), 9);
  EXPECT_EQ(std::count(val_points.begin(), val_points.end(), ','), 3);
  const XmlCheck heat = check_xml(read_file_bytes(dir + "/plots/load_layer0.svg"));
  EXPECT_EQ(heat.find("rect", "class", "cell").size(), 6u * 9u);
}

// The routing probe's fields of evaluation lines: each statistic one chart, a line per layer that has it.
TEST(MetricsPlot, RoutingStatisticsAreChartedPerLayerAndBadOnesNamed) {
  const std::string dir = temp_dir("metrics_routing");
  std::string text;
  for (int64_t s = 1; s <= 6; ++s) {
    json::Value m = metrics_line(s, 4.0 - 0.1 * double(s), {{0.5, 0.25, 0.25}, {0.25, 0.5, 0.25}},
                                 s % 2 == 0 ? std::optional<double>(4.0) : std::nullopt);
    if (s % 2 == 0) {
      json::Value layers = json::Value::array();
      for (int l = 0; l < 2; ++l) {
        json::Value stats = json::Value::object();
        stats["agreement"] = 0.4 + 0.05 * double(s + l);
        stats["agreement_chance"] = 1.0 / 3;
        stats["load_entropy"] = 1.0 + 0.01 * double(s);
        stats["grad_vse"] = 0.1 * double(l + 1);
        stats["grad_score"] = 0.01 * double(s);
        layers.push_back(stats);
      }
      json::Value routing = json::Value::object();
      routing["tokens"] = 512;
      routing["layers"] = layers;
      m["routing"] = routing;
    }
    text += m.dump() + "\n";
  }
  write_file_atomic(dir + "/metrics.jsonl", text);
  const RunMetrics run = read_metrics(dir + "/metrics.jsonl");
  ASSERT_EQ(run.steps[1].routing.size(), 2u);
  EXPECT_DOUBLE_EQ(run.steps[1].routing[1].at("agreement"), 0.55);
  EXPECT_TRUE(run.steps[2].routing.empty());
  write_run_plots(dir);
  const std::vector<std::pair<std::string, size_t>> charts = {
      {"routing_agreement", 3}, {"load_entropy", 2}, {"grad_vse", 2}, {"grad_score", 2}};
  for (const auto& [name, lines] : charts) {
    const XmlCheck svg = check_xml(read_file_bytes(dir + "/plots/" + name + ".svg"));
    ASSERT_EQ(svg.error, "") << name;
    const auto polylines = svg.find("polyline", "class", "line");
    ASSERT_EQ(polylines.size(), lines) << name;
    for (const auto& line : polylines) {
      const std::string points = line.attribute("points");
      EXPECT_EQ(std::count(points.begin(), points.end(), ','), 3) << name;  // steps 2, 4, 6
    }
  }
  EXPECT_NE(read_file_bytes(dir + "/plots/load_entropy.svg").find("log 3 = 1.1"), std::string::npos);

  write_file_atomic(dir + "/metrics.jsonl", "{\"step\":1,\"tokens\":1,\"train_loss\":1,\"lr\":1,\"grad_norm\":1,"
                    "\"tokens_per_s\":1,\"routing\":{\"layers\":[{\"agreement\":\"high\"}]}}\n");
  EXPECT_EQ(error_of(dir + "/metrics.jsonl"),
            "[metrics] " + dir + "/metrics.jsonl:1: field \"agreement\" must be a number, got string");
}

TEST(MetricsPlot, DenseRunsHaveNoLoadChartsAndLongRunsAreAveragedIntoColumns) {
  const std::string dense = temp_dir("metrics_dense");
  write_run(dense, 5, false);
  std::vector<std::string> names;
  for (const Chart& c : metrics_charts(read_metrics(dense + "/metrics.jsonl"))) names.push_back(c.name);
  EXPECT_EQ(names, (std::vector<std::string>{"loss", "lr", "grad_norm", "tokens_per_s"}));

  const std::string long_run = temp_dir("metrics_long");
  write_run(long_run, 450, true, 3);
  const RunMetrics run = read_metrics(long_run + "/metrics.jsonl");
  for (const Chart& c : metrics_charts(run)) {
    EXPECT_EQ(check_xml(c.svg).error, "") << c.name;
    if (c.name != "load_layer0") continue;
    const auto cells = check_xml(c.svg).find("rect", "class", "cell");
    ASSERT_EQ(cells.size(), 3u * 200u);
    EXPECT_NE(cells[0].attribute("fill"), cells[1].attribute("fill"));  // random loads, not one colour
  }
}

TEST(MetricsPlot, PlotCommandWritesThePlotsAndRejectsBadRuns) {
  const std::string dir = temp_dir("plot_cli");
  const std::string cli = UOE_CLI_PATH;
  write_run(dir + "/run", 6, true);
  int code = 0;
  std::string out = run_command(cli + " plot --run " + dir + "/run", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find(dir + "/run/plots/index.html"), std::string::npos) << out;
  EXPECT_EQ(check_xml(read_file_bytes(dir + "/run/plots/index.html")).error, "");
  out = run_command(cli + " plot --run " + dir + "/run --out " + dir + "/elsewhere", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_TRUE(std::filesystem::exists(dir + "/elsewhere/load_layer0.svg"));

  out = run_command(cli + " plot --run " + dir + "/nothing", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("no metrics.jsonl in '" + dir + "/nothing'"), std::string::npos) << out;
  out = run_command(cli + " plot", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--run is required"), std::string::npos) << out;
  std::ofstream(dir + "/run/metrics.jsonl", std::ios::app) << "{\"step\": 7}\n";
  out = run_command(cli + " plot --run " + dir + "/run", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find(dir + "/run/metrics.jsonl:8: "), std::string::npos) << out;  // 6 lines + 1 empty + the bad one
}

TEST(MetricsPlot, IndexOfARunDirectoryNamedInOtherBytesThanUtf8IsWellFormed) {
  const std::string dir = temp_dir("metrics_bytes") + "/run\xff\xfe<&";
  write_run(dir, 3, true);
  write_run_plots(dir);
  const XmlCheck page = check_xml(read_file_bytes(dir + "/plots/index.html"));
  EXPECT_EQ(page.error, "");
}

TEST(MetricsPlot, PlotCommandReadsARealTrainingRun) {
  const std::string dir = temp_dir("plot_real");
  test::micro_data(dir);
  std::ofstream(dir + "/micro.json") << nn::to_json(test::micro_config(nn::FfnKind::MoE)).dump(2);
  const std::string cli = UOE_CLI_PATH;
  int code = 0;
  std::string out = run_command(cli + " train --config " + dir + "/micro.json --data " + dir + "/text.txt --out " +
                                    dir + "/run --steps 6 --batch 4 --seq 32 --eval-every 3 --eval-batches 2 --quiet",
                                &code);
  ASSERT_EQ(code, 0) << out;
  out = run_command(cli + " plot --run " + dir + "/run", &code);
  ASSERT_EQ(code, 0) << out;
  const RunMetrics run = read_metrics(dir + "/run/metrics.jsonl");
  ASSERT_EQ(run.steps.size(), 6u);
  EXPECT_TRUE(run.steps[2].val_loss && run.steps[5].val_loss);
  EXPECT_FALSE(run.steps[0].val_loss);
  ASSERT_EQ(run.steps[0].load.size(), 2u);
  EXPECT_EQ(run.steps[0].load[1].size(), 4u);
  const XmlCheck page = check_xml(read_file_bytes(dir + "/run/plots/index.html"));
  ASSERT_EQ(page.error, "");
  for (const char* id :
       {"loss", "lr", "grad_norm", "tokens_per_s", "model_tflops", "peak_memory", "balance", "load_layer0", "load_layer1"})
    EXPECT_EQ(page.find("figure", "id", id).size(), 1u) << id;
  // the routing probe at each evaluation: one line per layer and the chance line; no gradient paths for MoE
  ASSERT_EQ(run.steps[2].routing.size(), 2u);
  EXPECT_TRUE(run.steps[0].routing.empty());
  EXPECT_EQ(run.steps[5].routing[1].count("agreement"), 1u);
  for (const char* id : {"routing_agreement", "load_entropy"}) EXPECT_EQ(page.find("figure", "id", id).size(), 1u) << id;
  EXPECT_TRUE(page.find("figure", "id", "grad_vse").empty());
  const auto agreement = check_xml(read_file_bytes(dir + "/run/plots/routing_agreement.svg")).find("polyline", "class", "line");
  ASSERT_EQ(agreement.size(), 3u);
  for (const auto& line : agreement) {
    const std::string points = line.attribute("points");
    EXPECT_EQ(std::count(points.begin(), points.end(), ','), 2);  // steps 3 and 6
  }
  // throughput: the session's and the step's own, one curve each; TFLOP/s and memory as the metrics have them
  const XmlCheck throughput = check_xml(read_file_bytes(dir + "/run/plots/tokens_per_s.svg"));
  EXPECT_EQ(throughput.find("polyline", "class", "line").size(), 2u);
  ASSERT_TRUE(run.steps[5].model_tflops && run.steps[5].peak_memory_mib && run.steps[5].step_tokens_per_s);
  EXPECT_GT(*run.steps[5].peak_memory_mib, 0.0);
}

}  // namespace
}  // namespace uoe::analysis
