// uoe analyze: routing analysis of a checkpoint over a text (report.html, stats.json, CSV files), of two
// checkpoints side by side (--compare), or of every run of a `uoe compare` folder (--runs).
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <optional>

#include "analysis/compare_report.h"
#include "analysis/report.h"
#include "analysis/routing_flags.h"
#include "commands.h"
#include "nn/checkpoint.h"

namespace uoe::cli {
namespace {

analysis::AnalysisOptions analysis_options(const Args& a) {
  analysis::AnalysisOptions o;
  o.tokens = a.integer("tokens");
  o.seq = a.integer("seq");
  o.batch = a.integer("batch");
  o.activation_tokens = a.integer("samples");
  o.gradient_windows = a.integer("grad-windows");
  o.example_tokens = a.integer("examples");
  o.bins = a.integer("bins");
  UOE_CHECK(o.bins >= 1 && o.example_tokens >= 0, "--bins must be >= 1 and --examples >= 0");
  return o;
}

// The analysis of checkpoint `ckpt` over `data` (the memory it needs checked first), with a progress bar.
analysis::AnalysisResult analyze_checkpoint(const Args& a, const std::string& ckpt, const std::string& data,
                                            analysis::AnalysisOptions o) {
  const nn::ModelConfig config = nn::checkpoint_config(ckpt);
  const int64_t seq = o.seq > 0 ? o.seq : config.context;
  if (seq <= config.context && o.batch >= 1 && o.gradient_windows >= 1) {  // else analyze's own errors say why
    // The forwards of --batch windows, then for a UoE model one backward over --grad-windows of them.
    double backward = 0;
    if (config.ffn.kind == nn::FfnKind::UoE) {
      const nn::MemoryEstimate e = nn::estimate_training_memory(config, {.batch = o.gradient_windows, .seq = seq});
      backward = e.total - e.optimizer - e.buckets;
    }
    check_inference_memory(a, "analyze", config, {.batch = o.batch, .seq = seq}, Device::cpu(), backward);
  }
  const TrainedModel trained = load_trained_model(ckpt);
  const auto tokens = open_tokens_once(data, *trained.tokenizer, checkpoint_tokens_advice(ckpt));
  const nn::TokenDataset split(tokens);
  if (!a.has("tokens")) o.tokens = std::min(o.tokens, tokens->size());  // the default: at most the whole file
  std::optional<TaskProgress> progress;
  progress.emplace("window");
  o.on_batch = [&](int64_t done, int64_t total) {
    progress->update(done, total, done == total && config.ffn.kind == nn::FfnKind::UoE ? "gradient paths next" : "");
  };
  analysis::AnalysisResult r = analysis::analyze(*trained.model, *tokens, split.val_begin(), *trained.tokenizer, o);
  progress.reset();  // the bar's line ends before the summary
  return r;
}

void print_summary(const std::string& ckpt, const std::string& data, const analysis::AnalysisResult& r) {
  std::printf("%s: analysed %ld tokens of %s in %.1f s (%s FFN)\n", ckpt.c_str(), long(r.tokens), data.c_str(),
              r.seconds, nn::ffn_kind_name(r.config.ffn.kind));
  std::printf("%-6s %13s %13s %12s %12s %12s\n", "layer", "load entropy", "confidence H", "spearman", "topK overlap",
              "random");
  for (size_t l = 0; l < r.layers.size(); ++l) {
    const analysis::LayerAnalysis& x = r.layers[l];
    std::printf("%-6zu %13.3f %13.3f %12.3f %12.3f %12.3f\n", l, x.load_entropy, x.confidence_entropy, x.full.spearman,
                x.full.overlap, x.full.random_overlap);
  }
  for (const analysis::RoutingFlag& f : analysis::routing_flags(r)) std::printf("flag: %s\n", f.message.c_str());
}

// The routed checkpoints of the runs in `dir` (<dir>/<run>/checkpoint, as uoe compare writes them), by run name;
// dense runs are left out (they have no routing), each with a line saying so.
std::vector<std::pair<std::string, std::string>> routed_runs(const std::string& dir) {
  UOE_CHECK(std::filesystem::is_directory(dir), "--runs ", dir, " is not a directory");
  std::vector<std::pair<std::string, std::string>> runs;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string ckpt = entry.path().string() + "/checkpoint";
    if (!std::filesystem::is_directory(ckpt)) continue;
    if (nn::checkpoint_config(ckpt).ffn.kind == nn::FfnKind::Dense) {
      std::printf("%s: dense FFN, no routing to analyse: left out\n", ckpt.c_str());
      continue;
    }
    runs.push_back({entry.path().filename().string(), ckpt});
  }
  std::sort(runs.begin(), runs.end());
  UOE_CHECK(!runs.empty(), "--runs ", dir, " holds no run with a routed checkpoint (expected <run>/checkpoint "
            "folders of MoE, AoE or UoE models, as uoe compare writes them)");
  return runs;
}

int analyze_runs(const Args& a, const std::string& data, const std::string& out) {
  UOE_CHECK(!a.has("ckpt") && !a.has("compare"), "--runs analyses every run of a folder: give it without --ckpt "
            "and --compare");
  std::vector<analysis::NamedAnalysis> runs;
  for (const auto& [name, ckpt] : routed_runs(a.str("runs"))) {
    runs.push_back({ckpt, name, analyze_checkpoint(a, ckpt, data, analysis_options(a))});
    print_summary(ckpt, data, runs.back().result);
  }
  analysis::write_compare_report(out, runs);
  std::printf("report: %s/report.html (each run's full report in %s/<run>/report.html)\n", out.c_str(), out.c_str());
  return 0;
}

}  // namespace

int cmd_analyze(const Args& a) {
  set_threads(a.integer("threads"));
  const std::string data = a.required("data"), out = a.required("out");
  if (a.has("runs")) return analyze_runs(a, data, out);
  const std::string ckpt = a.required("ckpt");
  const analysis::AnalysisOptions o = analysis_options(a);
  const analysis::AnalysisResult r = analyze_checkpoint(a, ckpt, data, o);
  print_summary(ckpt, data, r);
  if (!a.has("compare")) {
    analysis::write_report(out, r, "Routing analysis of " + ckpt);
    std::printf("report: %s/report.html\n", out.c_str());
    return 0;
  }
  const std::string other = a.str("compare");
  const analysis::AnalysisResult b = analyze_checkpoint(a, other, data, o);
  print_summary(other, data, b);
  analysis::write_compare_report(out, {{ckpt, "A", r}, {other, "B", b}});
  std::printf("report: %s/report.html (A: %s/a/report.html, B: %s/b/report.html)\n", out.c_str(), out.c_str(),
              out.c_str());
  return 0;
}

}  // namespace uoe::cli
