// Console progress on stderr: the trainer's, and that of any long task (eval, analyze, compare). On a terminal: a one-line bar redrawn in place. In a log (stderr is a
// file or a pipe, as under Slurm or nohup): a plain line at most every `log_interval_s` seconds instead of a bar
// that would pile up in one endless line. Either way each validation result gets a line of its own that stays.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>

namespace uoe::nn {

class Progress {
 public:
  Progress(std::FILE* out, bool terminal, double log_interval_s = 30);
  // After a training step. eta_s: seconds left; elapsed_s: since training started (rate-limits the log lines);
  // fraction: of the run done, which a time limit may end before `total` steps (negative: step / total).
  void step(int64_t step, int64_t total, double loss, double tokens_per_s, double eta_s, double elapsed_s,
            double fraction = -1);
  // After `done` of `total` units of another task, `what` naming them ("batch", "run"); `detail` follows the
  // count. The ETA assumes the units left take as long as those done.
  void task(const std::string& what, int64_t done, int64_t total, double elapsed_s, const std::string& detail = "");
  // After a validation at `step` (call after step() for the same step).
  void validation(int64_t step, int64_t total, double train_loss, double val_loss, double elapsed_s);
  // Ends the bar's line.
  void finish();

 private:
  // The bar (on a terminal) or a rate-limited line (in a log) of `text`; `last` always gets its log line.
  void show(double fraction, const std::string& text, double elapsed_s, bool last);

  std::FILE* out_;
  bool terminal_;
  double interval_s_, last_line_s_ = -1;
  int bar_width_ = 0;  // characters of the bar on screen (0: none)
};

}  // namespace uoe::nn
