// Training-time views: a run's metrics.jsonl (written by nn/trainer.cpp) read back, and its charts as SVG + HTML.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace uoe::analysis {

// One line of metrics.jsonl: the state after optimiser step `step`.
struct StepMetrics {
  int64_t step = 0;
  int64_t tokens = 0;  // tokens seen since the start of the run
  double train_loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0;
  std::optional<double> val_loss;  // only on evaluation steps
  // Present in metrics written since they were added: the step's own tokens/s, model TFLOP/s, and the device's
  // peak tensor memory so far (MiB).
  std::optional<double> step_tokens_per_s, model_tflops, peak_memory_mib;
  // Per layer: the fraction of routed (token, slot) pairs each expert received, and the Switch balance
  // n Σ f_i P_i (1.0 = balanced). Dense layers have an empty load and no balance.
  std::vector<std::vector<double>> load;
  std::vector<std::optional<double>> balance;
  // Evaluation steps of a routed run with the routing probe ("routing"): per layer, each statistic by its name
  // ("agreement", "agreement_chance", "load_entropy", "grad_vse", "grad_score"; docs/METRICS.md).
  std::vector<std::map<std::string, double>> routing;
};

struct RunMetrics {
  std::string path;  // the metrics.jsonl read
  std::vector<StepMetrics> steps;
};

// Reads a metrics.jsonl; empty lines are skipped. Errors name the file and line:
// "<path>:<line>: ..." for bad JSON, a missing or mistyped field, or a malformed layer entry.
RunMetrics read_metrics(const std::string& path);

struct Chart {
  std::string name;  // file stem: "loss", "lr", ..., "load_layer0"
  std::string title;
  std::string svg;
};

// Train and validation loss vs step, learning rate, gradient norm, tokens/s (the session's and each step's own),
// model TFLOP/s and peak memory (when the metrics have them), and for runs with routed layers
// the balance per layer and one expert-load heatmap per routed layer (rows = experts, columns = steps), and the
// routing probe's statistics over the evaluation steps, one chart per statistic with a line per layer.
std::vector<Chart> metrics_charts(const RunMetrics& metrics);

// Reads <run_dir>/metrics.jsonl and writes every chart as <out_dir>/<name>.svg and one self-contained
// <out_dir>/index.html with the SVGs inline (each in a <figure id="<name>">); files are written atomically.
// out_dir defaults to <run_dir>/plots. Returns out_dir.
std::string write_run_plots(const std::string& run_dir, const std::string& out_dir = "");

}  // namespace uoe::analysis
