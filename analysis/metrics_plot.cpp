// metrics.jsonl reader and the training-time charts (loss, lr, grad norm, throughput, balance, expert load).
#include "analysis/metrics_plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>

#include "analysis/svg_chart.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "core/option_names.h"
#include "core/json.h"

namespace uoe::analysis {
namespace {

constexpr size_t kMaxHeatmapColumns = 200;  // longer runs average consecutive steps into one column

const json::Value& field(const json::Value& object, const std::string& key, json::Value::Type type) {
  const json::Value& v = object.at(key);
  UOE_CHECK(v.type() == type, "field \"", key, "\" must be a ", json::type_name(type), ", got ",
            json::type_name(v.type()));
  return v;
}

double number(const json::Value& object, const std::string& key) {
  return field(object, key, json::Value::Type::Number).as_double();
}

int64_t integer(const json::Value& object, const std::string& key) {
  const json::Value& v = field(object, key, json::Value::Type::Number);
  UOE_CHECK(v.is_integer(), "field \"", key, "\" must be an integer, got ", v.dump());
  return v.as_int();
}

// {} for a dense layer, else {"load": [fractions], "balance": number}.
void parse_layer(const json::Value& layer, size_t index, StepMetrics& m) {
  UOE_CHECK(layer.is_object(), "layers[", index, "] must be an object, got ", json::type_name(layer.type()));
  std::vector<double> load;
  std::optional<double> balance;
  if (layer.contains("load")) {
    for (const json::Value& f : field(layer, "load", json::Value::Type::Array).as_array()) {
      UOE_CHECK(f.is_number(), "layers[", index, "].load must hold numbers, got ", json::type_name(f.type()));
      load.push_back(f.as_double());
    }
    balance = number(layer, "balance");
  }
  m.load.push_back(std::move(load));
  m.balance.push_back(balance);
}

// {"layers": [{"agreement": number, ...}, ...], ...}: every number of each layer's object, by name.
void parse_routing(const json::Value& routing, StepMetrics& m) {
  UOE_CHECK(routing.is_object(), "field \"routing\" must be an object, got ", json::type_name(routing.type()));
  const std::vector<json::Value>& layers = field(routing, "layers", json::Value::Type::Array).as_array();
  for (size_t l = 0; l < layers.size(); ++l) {
    UOE_CHECK(layers[l].is_object(), "routing.layers[", l, "] must be an object, got ",
              json::type_name(layers[l].type()));
    std::map<std::string, double>& stats = m.routing.emplace_back();
    for (const auto& [name, value] : layers[l].items()) stats[name] = number(layers[l], name);
  }
}

StepMetrics parse_step(const json::Value& line) {
  UOE_CHECK(line.is_object(), "expected a JSON object, got ", json::type_name(line.type()));
  StepMetrics m;
  m.step = integer(line, "step");
  m.tokens = integer(line, "tokens");
  m.train_loss = number(line, "train_loss");
  m.lr = number(line, "lr");
  m.grad_norm = number(line, "grad_norm");
  m.tokens_per_s = number(line, "tokens_per_s");
  if (line.contains("val_loss")) m.val_loss = number(line, "val_loss");
  if (line.contains("step_tokens_per_s")) m.step_tokens_per_s = number(line, "step_tokens_per_s");
  if (line.contains("model_tflops")) m.model_tflops = number(line, "model_tflops");
  if (line.contains("peak_memory_mib")) m.peak_memory_mib = number(line, "peak_memory_mib");
  if (line.contains("layers")) {
    const std::vector<json::Value>& layers = field(line, "layers", json::Value::Type::Array).as_array();
    for (size_t l = 0; l < layers.size(); ++l) parse_layer(layers[l], l, m);
  }
  if (line.contains("routing")) parse_routing(line.at("routing"), m);
  return m;
}

// The series of one value per step (steps without it left out: `value` returns an optional or a number).
template <typename Value>
Series per_step(const RunMetrics& run, const std::string& label, Value value) {
  Series s{label, {}, {}};
  for (const StepMetrics& m : run.steps) {
    const std::optional<double> v = value(m);
    if (!v) continue;
    s.x.push_back(double(m.step));
    s.y.push_back(*v);
  }
  return s;
}

// A line chart of one value per step.
template <typename Value>
std::string per_step_chart(const RunMetrics& run, const std::string& title, const std::string& y_label, Value value) {
  return line_chart_svg(title, "step", y_label, {per_step(run, y_label, value)});
}

size_t layer_count(const RunMetrics& run) {
  size_t n = 0;
  for (const StepMetrics& m : run.steps) n = std::max(n, m.load.size());
  return n;
}

bool routed(const StepMetrics& m, size_t layer) { return layer < m.load.size() && !m.load[layer].empty(); }

// Rows = experts, columns = steps (consecutive steps averaged down to kMaxHeatmapColumns); empty for a dense layer.
std::string load_heatmap(const RunMetrics& run, size_t layer) {
  std::vector<const StepMetrics*> steps;
  for (const StepMetrics& m : run.steps)
    if (routed(m, layer)) steps.push_back(&m);
  if (steps.empty()) return "";
  const size_t experts = steps.front()->load[layer].size();
  const size_t columns = std::min(steps.size(), kMaxHeatmapColumns);
  std::vector<std::string> rows;
  for (size_t e = 0; e < experts; ++e) rows.push_back("expert " + std::to_string(e));
  std::vector<double> x(columns, 0);
  std::vector<std::vector<double>> values(experts, std::vector<double>(columns, 0));
  double hi = 0;
  for (size_t c = 0; c < columns; ++c) {
    const size_t begin = c * steps.size() / columns, end = (c + 1) * steps.size() / columns;
    for (size_t i = begin; i < end; ++i) {
      const std::vector<double>& load = steps[i]->load[layer];
      UOE_CHECK(load.size() == experts, "[plot] ", run.path, ": layer ", layer, " has ", load.size(),
                " experts at step ", steps[i]->step, " but ", experts, " at step ", steps.front()->step);
      x[c] += double(steps[i]->step) / double(end - begin);
      for (size_t e = 0; e < experts; ++e) values[e][c] += load[e] / double(end - begin);
    }
    for (size_t e = 0; e < experts; ++e) hi = std::max(hi, values[e][c]);
  }
  return heatmap_svg("Layer " + std::to_string(layer) + " expert load (share of routed tokens)", "step", rows, x,
                     values, 0, hi);
}

// One line per routed layer; empty for a dense run.
std::string balance_chart(const RunMetrics& run) {
  std::vector<Series> series;
  for (size_t l = 0; l < layer_count(run); ++l) {
    Series s{"layer " + std::to_string(l), {}, {}};
    for (const StepMetrics& m : run.steps)
      if (routed(m, l) && m.balance[l]) {
        s.x.push_back(double(m.step));
        s.y.push_back(*m.balance[l]);
      }
    if (!s.x.empty()) series.push_back(std::move(s));
  }
  if (series.empty()) return "";
  return line_chart_svg("Load balance n·Σ f·P (1 = balanced)", "step", "balance", series);
}

std::string summary(const RunMetrics& run) {
  const StepMetrics& last = run.steps.back();
  std::optional<double> val;
  for (const StepMetrics& m : run.steps)
    if (m.val_loss) val = m.val_loss;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%zu steps (last %lld), %lld tokens, final train loss %.4f", run.steps.size(),
                static_cast<long long>(last.step), static_cast<long long>(last.tokens), last.train_loss);
  std::string s = buf;
  if (val) {
    std::snprintf(buf, sizeof buf, ", last val loss %.4f", *val);
    s += buf;
  }
  return s;
}

std::string index_html(const std::string& run_dir, const RunMetrics& run, const std::vector<Chart>& charts) {
  std::ostringstream o;
  o << "<!DOCTYPE html>\n<html xmlns=\"http://www.w3.org/1999/xhtml\" lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n"
    << "<title>Training metrics: " << escape_xml(run_dir) << "</title>\n"
    << "<style>body { font-family: sans-serif; margin: 2em; } figure { display: inline-block; margin: 0.5em; "
       "}</style>\n"
    << "</head>\n<body>\n<h1>Training metrics</h1>\n<p><code>" << escape_xml(run_dir)
    << "</code>: " << escape_xml(summary(run)) << "</p>\n";
  for (const Chart& c : charts)
    o << "<figure id=\"" << escape_xml(c.name) << "\">\n"
      << c.svg << "<figcaption>" << escape_xml(c.title) << "</figcaption>\n</figure>\n";
  o << "</body>\n</html>\n";
  return o.str();
}

}  // namespace

RunMetrics read_metrics(const std::string& path) {
  RunMetrics run{path, {}};
  std::istringstream in(read_file_bytes(path));
  size_t line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (line.empty()) continue;
    try {
      run.steps.push_back(parse_step(json::parse(line)));
    } catch (const Error& e) {
      fail("[metrics] ", path, ":", line_number, ": ", e.what());
    }
  }
  return run;
}

// One line per layer of the routing statistic `name` over the evaluation steps that have it (none: empty).
std::vector<Series> routing_series(const RunMetrics& run, const std::string& name) {
  std::vector<Series> series;
  for (const StepMetrics& m : run.steps)
    for (size_t l = 0; l < m.routing.size(); ++l) {
      const auto it = m.routing[l].find(name);
      if (it == m.routing[l].end()) continue;
      while (series.size() <= l) series.push_back({"layer " + std::to_string(series.size()), {}, {}});
      series[l].x.push_back(double(m.step));
      series[l].y.push_back(it->second);
    }
  std::erase_if(series, [](const Series& s) { return s.x.empty(); });
  return series;
}

// The mean of the routing statistic `name` over the layers of step `m` that have it; none when no layer has.
std::optional<double> mean_over_layers(const StepMetrics& m, const std::string& name) {
  double sum = 0;
  int64_t count = 0;
  for (const std::map<std::string, double>& layer : m.routing)
    if (const auto it = layer.find(name); it != layer.end()) {
      sum += it->second;
      ++count;
    }
  return count > 0 ? std::optional<double>(sum / double(count)) : std::nullopt;
}

// "log 8 = 2.08": the load entropy of a balanced layer of the run's first routed layer.
std::string balanced_entropy(const RunMetrics& run) {
  for (const StepMetrics& m : run.steps)
    for (const std::vector<double>& load : m.load)
      if (!load.empty()) {
        char buf[64];
        std::snprintf(buf, sizeof buf, "log %zu = %.3g", load.size(), std::log(double(load.size())));
        return buf;
      }
  return "log n";
}

// The routing probe's charts: agreement (with chance, the mean over layers), load entropy, and the two gradient
// paths into UoE's routing neurons.
void add_routing_charts(const RunMetrics& run, std::vector<Chart>& charts) {
  const auto chart = [&](const std::string& name, const std::string& title, const std::string& y_label,
                         std::vector<Series> series, const std::string& reference, const std::string& label) {
    if (series.empty()) return;
    if (!reference.empty()) {
      Series ref{label, {}, {}};
      for (const StepMetrics& m : run.steps)
        if (std::optional<double> v = mean_over_layers(m, reference)) {
          ref.x.push_back(double(m.step));
          ref.y.push_back(*v);
        }
      series.push_back(std::move(ref));
    }
    charts.push_back({name, title, line_chart_svg(title, "step", y_label, series)});
  };
  chart("routing_agreement", "Routing agreement: top-K of the score vs of the full activation", "overlap",
        routing_series(run, "agreement"), "agreement_chance", "chance");
  chart("load_entropy", "Load entropy (nats; balanced: " + balanced_entropy(run) + ")", "entropy",
        routing_series(run, "load_entropy"), "", "");
  chart("grad_vse", "Routing-neuron gradient through the virtual shared expert", "norm",
        routing_series(run, "grad_vse"), "", "");
  chart("grad_score", "Routing-neuron gradient through the routing scores", "norm",
        routing_series(run, "grad_score"), "", "");
}

std::vector<Chart> metrics_charts(const RunMetrics& run) {
  Series train{"train loss", {}, {}}, val{"val loss", {}, {}};
  for (const StepMetrics& m : run.steps) {
    train.x.push_back(double(m.step));
    train.y.push_back(m.train_loss);
    if (m.val_loss) {
      val.x.push_back(double(m.step));
      val.y.push_back(*m.val_loss);
    }
  }
  std::vector<Chart> charts = {
      {"loss", "Loss", line_chart_svg("Loss (nats/token)", "step", "loss", {train, val})},
      {"lr", "Learning rate", per_step_chart(run, "Learning rate", "lr", [](const StepMetrics& m) { return m.lr; })},
      {"grad_norm", "Gradient norm",
       per_step_chart(run, "Gradient norm", "grad norm", [](const StepMetrics& m) { return m.grad_norm; })},
  };
  Series session = per_step(run, "this session", [](const StepMetrics& m) { return m.tokens_per_s; });
  Series own = per_step(run, "the step alone", [](const StepMetrics& m) { return m.step_tokens_per_s; });
  std::vector<Series> throughput = {session};
  if (!own.x.empty()) throughput.push_back(own);
  charts.push_back({"tokens_per_s", "Throughput", line_chart_svg("Throughput (tokens/s)", "step", "tokens/s", throughput)});
  if (run.steps.back().model_tflops)
    charts.push_back({"model_tflops", "Model TFLOP/s",
                      per_step_chart(run, "Model FLOPs per second (TFLOP/s, all ranks)", "TFLOP/s",
                                     [](const StepMetrics& m) { return m.model_tflops; })});
  if (run.steps.back().peak_memory_mib)
    charts.push_back({"peak_memory", "Peak memory",
                      per_step_chart(run, "Peak tensor memory on the device so far (MiB)", "MiB",
                                     [](const StepMetrics& m) { return m.peak_memory_mib; })});
  if (std::string svg = balance_chart(run); !svg.empty()) charts.push_back({"balance", "Load balance", std::move(svg)});
  for (size_t l = 0; l < layer_count(run); ++l)
    if (std::string svg = load_heatmap(run, l); !svg.empty())
      charts.push_back(
          {"load_layer" + std::to_string(l), "Layer " + std::to_string(l) + " expert load", std::move(svg)});
  add_routing_charts(run, charts);
  return charts;
}

std::string write_run_plots(const std::string& run_dir, const std::string& out_dir) {
  const std::string path = run_dir + "/metrics.jsonl";
  UOE_CHECK(std::filesystem::is_regular_file(path), "[plot] no metrics.jsonl in '", run_dir,
            "' (expected the ", option_name("TrainOptions::out_dir"), " of a training run)");
  const RunMetrics run = read_metrics(path);
  UOE_CHECK(!run.steps.empty(), "[plot] ", path, " has no steps yet");
  const std::string dir = out_dir.empty() ? run_dir + "/plots" : out_dir;
  std::filesystem::create_directories(dir);
  const std::vector<Chart> charts = metrics_charts(run);
  for (const Chart& c : charts) write_file_atomic(dir + "/" + c.name + ".svg", c.svg);
  write_file_atomic(dir + "/index.html", index_html(run_dir, run, charts));
  return dir;
}

}  // namespace uoe::analysis
