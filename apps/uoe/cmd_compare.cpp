// uoe compare: trains each FFN kind at matched active compute for the same wall-clock budget
// and writes results.md (validation loss mean ± std over seeds), val_loss.svg and each run's plots/.
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

struct Run {
  std::string arch;
  uint64_t seed;
  std::string dir;
  analysis::Series val_curve;  // validation loss vs tokens
  analysis::StepMetrics last;  // the final step
};

// The validation curve and last step of a finished run.
void read_run(Run& r) {
  const analysis::RunMetrics m = analysis::read_metrics(r.dir + "/metrics.jsonl");
  r.val_curve = {r.arch + " seed " + std::to_string(r.seed), {}, {}};
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
  const std::vector<std::string> archs = split_list(a.str("archs"));
  const int64_t seeds = a.integer("seeds");
  const double minutes = a.number("minutes");
  const int64_t max_steps = a.integer("steps");
  const std::string prefix = a.str("preset-prefix");
  UOE_CHECK(!archs.empty() && seeds > 0 && minutes > 0, "--archs, --seeds and --minutes must be non-empty/positive");
  std::vector<int64_t> contexts;
  for (const std::string& arch : archs)
    contexts.push_back(nn::load_model_config(prefix + arch).context);  // a bad name fails before any run
  const int64_t seq = a.integer("seq");
  for (size_t i = 0; i < archs.size(); ++i)  // and so does a window longer than a kind's context
    UOE_CHECK(seq <= contexts[i], "--seq ", seq, " exceeds the context ", contexts[i], " of ", prefix + archs[i],
              ": pass a shorter --seq, or leave that kind out of --archs");
  UOE_CHECK(a.flag("overwrite") || !std::filesystem::exists(out + "/results.md"), "--out ", out, " already holds a "
            "comparison (results.md): add --overwrite to run it again there, or choose another --out");
  std::filesystem::create_directories(out);
  auto tok = nn::make_byte_tokenizer();
  const auto tokens = open_tokens(data, *tok, out + "/tokens.bin", "pass the text, or tokens prepared with "
                                  "--tokenizer byte (compare trains byte-level models)");

  // Every (kind, seed) run is a child `uoe train` process; --jobs of them run at once, each with
  // --threads / --jobs threads, so every kind gets the same resources.
  const int64_t jobs = a.integer("jobs"), threads = a.integer("threads");
  UOE_CHECK(jobs >= 1 && threads >= jobs, "--jobs must be between 1 and --threads");
  std::vector<Run> runs;
  for (const std::string& arch : archs)
    for (int64_t s = 0; s < seeds; ++s)
      runs.push_back({arch, uint64_t(s), out + "/" + arch + "-seed" + std::to_string(s), {}, {}});
  std::vector<std::pair<pid_t, size_t>> active;
  std::vector<double> started(runs.size(), 0.0);  // each run's start, on the progress clock
  size_t finished = 0;
  TaskProgress progress("runs done");
  // Overall: runs finished of all; per run: the time each active run has left of its --minutes.
  auto show_progress = [&] {
    std::string detail;
    for (const auto& [pid, i] : active) {
      const double left = std::max(0.0, minutes * 60 - (progress.elapsed_s() - started[i]));
      detail += (detail.empty() ? "" : ", ") + runs[i].arch + " seed " + std::to_string(runs[i].seed) + " " +
                std::to_string(int64_t(left / 60)) + " min " + std::to_string(int64_t(left) % 60) + " s left";
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
        UOE_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the run ", r.arch, " seed ", r.seed, " failed (see ",
                  r.dir, "/train.log)");
        ++finished;
        show_progress();
        return;
      }
  };
  for (size_t i = 0; i < runs.size(); ++i) {
    if (int64_t(active.size()) == jobs) reap_one();
    const Run& r = runs[i];
    progress.end_line();
    std::printf("== %s seed %lu (%.1f min, %ld threads)\n", r.arch.c_str(), (unsigned long)r.seed, minutes,
                long(threads / jobs));
    std::fflush(stdout);
    std::filesystem::create_directories(r.dir);
    const std::vector<std::string> args = {
        "/proc/self/exe", "train", "--config", prefix + r.arch, "--data", tokens->path(), "--out", r.dir,
        "--steps", std::to_string(max_steps), "--batch", std::to_string(a.integer("batch")),
        "--seq", std::to_string(seq), "--lr", a.str("lr"), "--seed", std::to_string(r.seed),
        "--eval-every", std::to_string(a.integer("eval-every")), "--eval-batches",
        std::to_string(a.integer("eval-batches")), "--minutes", std::to_string(minutes), "--threads",
        std::to_string(threads / jobs), "--quiet", "--overwrite"};
    active.emplace_back(spawn(args, r.dir + "/train.log"), i);
    started[i] = progress.elapsed_s();
  }
  while (!active.empty()) reap_one();
  for (Run& r : runs) {
    read_run(r);
    analysis::write_run_plots(r.dir);
  }

  std::ostringstream md;
  md << "# uoe compare\n\n" << seeds << " seed(s) x " << minutes << " min per kind, " << jobs
     << " run(s) at a time with " << threads / jobs << " thread(s) each, batch " << a.integer("batch")
     << " x " << seq << ", AdamW lr " << a.number("lr") << ", data `" << data << "`\n\n";
  md << "| kind | val loss (nats/token) | tokens/s | steps | tokens seen | total params | active params |\n";
  md << "|---|---|---|---|---|---|---|\n";
  std::vector<analysis::Series> series;
  for (const std::string& arch : archs) {
    double sum = 0, sumsq = 0, tps = 0, steps = 0, seen = 0;
    int n = 0;
    for (const Run& r : runs) {
      if (r.arch != arch) continue;
      const double last = r.val_curve.y.back();
      sum += last;
      sumsq += last * last;
      tps += r.last.tokens_per_s;
      steps += double(r.last.step);
      seen += double(r.last.tokens);
      ++n;
      series.push_back(r.val_curve);
    }
    const double mean = sum / n;
    // One seed has no spread to show: "n/a", not a standard deviation of 0.
    char spread[32] = "n/a (one seed)";
    if (n > 1) std::snprintf(spread, sizeof spread, "%.4f", std::sqrt(std::max(0.0, (sumsq - n * mean * mean) / (n - 1))));
    const nn::ModelCounts k = nn::count_model(nn::load_model_config(prefix + arch));
    char row[256];
    std::snprintf(row, sizeof row, "| %s | %.4f ± %s | %.0f | %.0f | %.2fM | %.2fM | %.2fM |\n", arch.c_str(), mean,
                  spread, tps / n, steps / n, seen / n / 1e6, k.total / 1e6, k.active / 1e6);
    md << row;
  }
  // A run that --minutes stopped early sits part-way down its cosine schedule (which spans --steps), so kinds that
  // ran fewer steps are compared at a higher learning rate.
  std::ostringstream early;
  for (const Run& r : runs)
    if (r.last.step < max_steps)
      early << (early.tellp() > 0 ? ", " : "") << r.arch << " seed " << r.seed << " at step " << r.last.step
            << " (lr " << r.last.lr << ")";
  if (early.tellp() > 0)
    md << "\n`--minutes` ended runs before `--steps " << max_steps << "`, part-way down the learning-rate schedule: "
       << early.str() << ". To compare every kind at the end of its schedule, pass a `--steps` that each reaches in "
       << "the time.\n";
  md << "\n![validation loss](val_loss.svg)\n\nTraining charts of each run: `<kind>-seed<s>/plots/index.html`.\n";
  write_file_atomic(out + "/results.md", md.str());
  write_file_atomic(out + "/val_loss.svg",
                    analysis::line_chart_svg("Validation loss vs tokens", "tokens", "val loss (nats/token)", series));
  std::fputs(md.str().c_str(), stdout);
  return 0;
}

}  // namespace uoe::cli
