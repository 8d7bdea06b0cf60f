// uoe compare: trains each variant (a preset or config file, with --set/--variant assignments) for the same
// wall-clock budget on the same seeds and writes results.md (validation loss mean ± std over seeds, the paired
// difference against the first variant with its 95% interval, every seed's loss), val_loss.svg and each run's
// plots/.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>


#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <sstream>
#include <thread>

#include "analysis/metrics_plot.h"
#include "analysis/seed_statistics.h"
#include "analysis/svg_chart.h"
#include "commands.h"
#include "core/atomic_file.h"
#include "core/error.h"
#include "nn/accounting.h"
#include "nn/config.h"

namespace uoe::cli {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

// One variant of the comparison: its runs train `config` with `sets` applied (uoe train --config, --set).
struct Variant {
  std::string label;              // its rows, and the prefix of its run directories
  std::string config;             // a preset or config file
  std::vector<std::string> sets;  // field=value, in order
  nn::ModelConfig model;          // what its runs train
};

struct Run {
  size_t variant;
  uint64_t seed;
  std::string dir;
  analysis::Series val_curve;  // validation loss vs tokens
  analysis::StepMetrics last;  // the final step
};

// The name of a run directory: letters, digits, '-', '_' and '.'.
void check_label(const std::string& label, const std::string& what) {
  UOE_CHECK(!label.empty() && label.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                      "0123456789-_.") == std::string::npos,
            what, " '", label, "' must be letters, digits, '-', '_' or '.' (it names run directories)");
}

// The label of an --archs entry: a kind (dense), a preset, or a config file's name without folder and .json.
std::string arch_label(const std::string& arch) {
  std::string label = arch.substr(arch.rfind('/') + 1);
  if (label.size() > 5 && label.compare(label.size() - 5, 5, ".json") == 0) label.resize(label.size() - 5);
  return label;
}

// --variant "label:field=value,field=value" (no assignment after the colon: the configuration as it is).
std::pair<std::string, std::vector<std::string>> parse_variant(const std::string& spec) {
  const size_t colon = spec.find(':');
  UOE_CHECK(colon != std::string::npos, "--variant '", spec, "' must be label:field=value,... (e.g. "
            "r32:ffn.routing_neurons=32; base: for the configuration unchanged)");
  const std::string label = spec.substr(0, colon);
  check_label(label, "--variant label");
  return {label, split_list(spec.substr(colon + 1))};
}

// Every --archs entry (<prefix><entry>) with every --variant (or as it is), and --set: the MoE and AoE ones with
// ffn.aux_loss = --balance-loss first (their own assignments win). Each is checked as uoe train will read it.
std::vector<Variant> comparison_variants(const Args& a) {
  const std::vector<std::string> archs = split_list(a.str("archs")), common = a.list("set");
  const std::string prefix = a.str("preset-prefix");
  UOE_CHECK(!archs.empty(), "--archs must name at least one FFN kind, preset or config file");
  std::vector<std::pair<std::string, std::vector<std::string>>> specs;
  for (const std::string& spec : a.list("variant")) specs.push_back(parse_variant(spec));
  if (specs.empty()) specs.push_back({"", {}});
  const double alpha = a.number("balance-loss");
  UOE_CHECK(alpha >= 0, "--balance-loss must be >= 0 (0: none), got ", alpha);
  std::vector<Variant> variants;
  for (const std::string& arch : archs)
    for (const auto& [name, own] : specs) {
      Variant v;
      v.label = arch_label(arch) + (name.empty() ? "" : "-" + name);
      check_label(v.label, "the variant");
      for (const Variant& other : variants)
        UOE_CHECK(other.label != v.label, "two variants are labelled '", v.label, "': give each a different label");
      v.config = prefix + arch;
      const nn::ModelConfig base = nn::load_model_config(v.config);  // a bad name fails before any run
      v.sets = common;
      v.sets.insert(v.sets.end(), own.begin(), own.end());
      const std::string source = "the variant " + v.label;
      const nn::FfnKind kind = nn::with_assignments(base, v.sets, source).ffn.kind;
      if (kind == nn::FfnKind::MoE || kind == nn::FfnKind::AoE)
        v.sets.insert(v.sets.begin(), "ffn.aux_loss=" + number_text(alpha));
      v.model = nn::with_assignments(base, v.sets, source);
      variants.push_back(v);
    }
  return variants;
}

// The final validation loss of each of the variant's runs, by seed.
std::vector<double> final_losses(const std::vector<Run>& runs, size_t variant) {
  std::vector<double> losses;
  for (const Run& r : runs)
    if (r.variant == variant) losses.push_back(r.val_curve.y.back());
  return losses;
}

// "%.4f" of x, or "n/a (one seed)" for NaN.
std::string decimals(double x) {
  if (std::isnan(x)) return "n/a (one seed)";
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", x);
  return text;
}

// The results tables: one row per variant (mean ± std, paired difference against the first variant, throughput
// and sizes), then every seed's loss, then what each variant trains.
std::string results_tables(const std::vector<Variant>& variants, const std::vector<Run>& runs, int64_t seeds) {
  std::ostringstream md;
  md << "| variant | val loss (nats/token) | Δ vs " << variants[0].label << " (95% CI) | tokens/s | steps | "
     << "tokens seen | total params | active params | FLOPs/token |\n";
  md << "|---|---|---|---|---|---|---|---|---|\n";
  const std::vector<double> reference = final_losses(runs, 0);
  for (size_t i = 0; i < variants.size(); ++i) {
    const Variant& v = variants[i];
    const std::vector<double> losses = final_losses(runs, i);
    const analysis::SeedSummary s = analysis::summarize_seeds(losses);
    const analysis::PairedDifference d = analysis::paired_difference(losses, reference);
    double tps = 0, steps = 0, seen = 0;
    for (const Run& r : runs)
      if (r.variant == i) {
        tps += r.last.tokens_per_s / s.n;
        steps += double(r.last.step) / s.n;
        seen += double(r.last.tokens) / s.n;
      }
    char delta[64] = "(reference)";
    if (i > 0) std::snprintf(delta, sizeof delta, "%+.4f ± %s", d.mean, decimals(d.half_width).c_str());
    const nn::ModelCounts k = nn::count_model(v.model);
    char row[384];
    std::snprintf(row, sizeof row, "| %s | %.4f ± %s | %s | %.0f | %.0f | %.2fM | %.2fM | %.2fM | %.2fM |\n",
                  v.label.c_str(), s.mean, decimals(s.std).c_str(), delta, tps, steps, seen / 1e6, k.total / 1e6,
                  k.active / 1e6, k.flops / 1e6);
    md << row;
  }
  md << "\nΔ: the mean over seeds of (variant − " << variants[0].label << ") at the same seed, ± the half-width of "
     << "its 95% interval (Student t, seeds − 1 degrees of freedom; n/a for one seed). FLOPs/token: forward, at "
     << "the model's full context.\n\n";
  md << "Final validation loss of every run (nats/token):\n\n| variant |";
  for (int64_t s = 0; s < seeds; ++s) md << " seed " << s << " |";
  md << "\n|---|";
  for (int64_t s = 0; s < seeds; ++s) md << "---|";
  md << "\n";
  for (size_t i = 0; i < variants.size(); ++i) {
    md << "| " << variants[i].label << " |";
    for (double loss : final_losses(runs, i)) md << " " << decimals(loss) << " |";
    md << "\n";
  }
  md << "\nWhat each variant trains:\n\n";
  for (const Variant& v : variants) {
    md << "- " << v.label << ": `" << v.config << "`";
    for (const std::string& set : v.sets) md << " `--set " << set << "`";
    md << "\n";
  }
  return md.str();
}

// The validation curve and last step of a finished run.
void read_run(Run& r, const std::string& label) {
  const analysis::RunMetrics m = analysis::read_metrics(r.dir + "/metrics.jsonl");
  r.val_curve = {label + " seed " + std::to_string(r.seed), {}, {}};
  for (const analysis::StepMetrics& s : m.steps)
    if (s.val_loss) {
      r.val_curve.x.push_back(double(s.tokens));
      r.val_curve.y.push_back(*s.val_loss);
    }
  UOE_CHECK(!r.val_curve.y.empty(), m.path, " has no validation point");
  r.last = m.steps.back();
}

// Starts a child process running args (stdout and stderr to log_path); returns its pid.
pid_t spawn(const std::vector<std::string>& args, const std::string& log_path) {
  const pid_t pid = ::fork();
  UOE_CHECK(pid >= 0, "fork failed");
  if (pid == 0) {
    std::vector<char*> argv;
    for (const std::string& s : args) argv.push_back(const_cast<char*>(s.c_str()));
    argv.push_back(nullptr);
    const int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  return pid;
}

}  // namespace

int cmd_compare(const Args& a) {
  const std::string out = a.required("out"), data = a.required("data");
  const int64_t seeds = a.integer("seeds");
  const double minutes = a.number("minutes");
  const int64_t max_steps = a.integer("steps");
  UOE_CHECK(seeds > 0 && minutes > 0, "--seeds and --minutes must be positive");
  const std::vector<Variant> variants = comparison_variants(a);
  const int64_t seq = a.integer("seq");
  for (const Variant& v : variants)  // a window longer than a variant's context fails before any run
    UOE_CHECK(seq <= v.model.context, "--seq ", seq, " exceeds the context ", v.model.context, " of ", v.config,
              ": pass a shorter --seq, or leave that kind out of --archs");
  UOE_CHECK(a.flag("overwrite") || !std::filesystem::exists(out + "/results.md"), "--out ", out, " already holds a "
            "comparison (results.md): add --overwrite to run it again there, or choose another --out");
  std::filesystem::create_directories(out);
  auto tok = nn::make_byte_tokenizer();
  const auto tokens = open_tokens(data, *tok, out + "/tokens.bin", "pass the text, or tokens prepared with "
                                  "--tokenizer byte (compare trains byte-level models)");

  // Every (variant, seed) run is a child `uoe train` process; --jobs of them run at once, each with
  // --threads / --jobs threads, so every variant gets the same resources.
  const int64_t jobs = a.integer("jobs"), threads = a.integer("threads");
  UOE_CHECK(jobs >= 1 && threads >= jobs, "--jobs must be between 1 and --threads");
  std::vector<Run> runs;
  for (size_t v = 0; v < variants.size(); ++v)
    for (int64_t s = 0; s < seeds; ++s)
      runs.push_back({v, uint64_t(s), out + "/" + variants[v].label + "-seed" + std::to_string(s), {}, {}});
  std::vector<std::pair<pid_t, size_t>> active;
  std::vector<double> started(runs.size(), 0.0);  // each run's start, on the progress clock
  size_t finished = 0;
  TaskProgress progress("runs done");
  // Overall: runs finished of all; per run: the time each active run has left of its --minutes.
  auto show_progress = [&] {
    std::string detail;
    for (const auto& [pid, i] : active) {
      const double left = std::max(0.0, minutes * 60 - (progress.elapsed_s() - started[i]));
      detail += (detail.empty() ? "" : ", ") + variants[runs[i].variant].label + " seed " +
                std::to_string(runs[i].seed) + " " + std::to_string(int64_t(left / 60)) + " min " + std::to_string(int64_t(left) % 60) + " s left";
    }
    progress.update(int64_t(finished), int64_t(runs.size()), detail);
  };
  // When a run fails (or anything else throws), the runs still going are stopped and waited for, so that none
  // keeps training unsupervised after compare has exited.
  struct StopActive {
    const std::vector<std::pair<pid_t, size_t>>& active;
    ~StopActive() {
      for (const auto& child : active) ::kill(child.first, SIGTERM);
      for (const auto& child : active) ::waitpid(child.first, nullptr, 0);
    }
  } stop_active{active};
  auto reap_one = [&] {
    int status = 0;
    pid_t pid = 0;
    while ((pid = ::waitpid(-1, &status, WNOHANG)) == 0) {  // the progress line follows the runs meanwhile
      show_progress();
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    UOE_CHECK(pid >= 0 || errno == EINTR, "waiting for the runs failed: ", std::strerror(errno));
    for (size_t i = 0; i < active.size(); ++i)
      if (active[i].first == pid) {
        const Run& r = runs[active[i].second];
        active.erase(active.begin() + long(i));  // reaped: not to be stopped
        UOE_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the run ", variants[r.variant].label, " seed ",
                  r.seed, " failed (see ",
                  r.dir, "/train.log)");
        ++finished;
        show_progress();
        return;
      }
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    if (int64_t(active.size()) == jobs) reap_one();
    const Run& r = runs[i];
    const Variant& v = variants[r.variant];
    progress.end_line();
    std::printf("== %s seed %lu (%.1f min, %ld threads)\n", v.label.c_str(), (unsigned long)r.seed, minutes,
                long(threads / jobs));
    std::fflush(stdout);
    std::filesystem::create_directories(r.dir);
    std::vector<std::string> args = {
        "/proc/self/exe", "train", "--config", v.config, "--data", tokens->path(), "--out", r.dir,
        "--steps", std::to_string(max_steps), "--batch", std::to_string(a.integer("batch")),
        "--seq", std::to_string(seq), "--lr", a.str("lr"), "--seed", std::to_string(r.seed),
        "--eval-every", std::to_string(a.integer("eval-every")), "--eval-batches",
        std::to_string(a.integer("eval-batches")), "--minutes", std::to_string(minutes), "--threads",
        std::to_string(threads / jobs), "--quiet", "--overwrite"};
    for (const std::string& set : v.sets) args.insert(args.end(), {"--set", set});
    active.emplace_back(spawn(args, r.dir + "/train.log"), i);
    started[i] = progress.elapsed_s();
  }
  while (!active.empty()) reap_one();
  for (Run& r : runs) {
    read_run(r, variants[r.variant].label);
    analysis::write_run_plots(r.dir);
  }

  std::ostringstream md;
  md << "# uoe compare\n\n" << seeds << " seed(s) x " << minutes << " min per variant, " << jobs
     << " run(s) at a time with " << threads / jobs << " thread(s) each, batch " << a.integer("batch")
     << " x " << seq << ", AdamW lr " << a.number("lr") << ", load-balance loss α " << a.number("balance-loss")
     << " for MoE and AoE, data `" << data << "`\n\n"
     << results_tables(variants, runs, seeds);
  std::vector<analysis::Series> series;
  for (const Run& r : runs) series.push_back(r.val_curve);
  // A run that --minutes stopped early sits part-way down its cosine schedule (which spans --steps), so kinds that
  // ran fewer steps are compared at a higher learning rate.
  std::ostringstream early;
  for (const Run& r : runs)
    if (r.last.step < max_steps)
      early << (early.tellp() > 0 ? ", " : "") << variants[r.variant].label << " seed " << r.seed << " at step "
            << r.last.step << " (lr " << r.last.lr << ")";
  if (early.tellp() > 0)
    md << "\n`--minutes` ended runs before `--steps " << max_steps << "`, part-way down the learning-rate schedule: "
       << early.str() << ". To compare every kind at the end of its schedule, pass a `--steps` that each reaches in "
       << "the time.\n";
  md << "\n![validation loss](val_loss.svg)\n\nTraining charts of each run: `<variant>-seed<s>/plots/index.html`.\n";
  write_file_atomic(out + "/results.md", md.str());
  write_file_atomic(out + "/val_loss.svg",
                    analysis::line_chart_svg("Validation loss vs tokens", "tokens", "val loss (nats/token)", series));
  std::fputs(md.str().c_str(), stdout);
  return 0;
}

}  // namespace uoe::cli
