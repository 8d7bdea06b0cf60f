// The trainer's console output on stderr. On a terminal: a one-line bar redrawn in place. In a log (stderr is a
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
  // After a training step. eta_s: seconds left; elapsed_s: since training started (rate-limits the log lines).
  void step(int64_t step, int64_t total, double loss, double tokens_per_s, double eta_s, double elapsed_s);
  // After a validation at `step` (call after step() for the same step).
  void validation(int64_t step, int64_t total, double train_loss, double val_loss, double elapsed_s);
  // Ends the bar's line.
  void finish();

 private:
  std::FILE* out_;
  bool terminal_;
  double interval_s_, last_line_s_ = -1;
  int bar_width_ = 0;  // characters of the bar on screen (0: none)
};

}  // namespace uoe::nn
