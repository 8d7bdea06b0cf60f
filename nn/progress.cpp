// Console progress of training: a redrawn bar on a terminal, rate-limited plain lines in a log.
#include "nn/progress.h"

#include <algorithm>

namespace uoe::nn {
namespace {

// "m:ss" or "h:mm:ss".
std::string format_duration(double seconds) {
  const int64_t t = int64_t(seconds + 0.5);
  char buf[32];
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ld:%02ld:%02ld", long(t / 3600), long(t / 60 % 60), long(t % 60));
  else std::snprintf(buf, sizeof buf, "%ld:%02ld", long(t / 60), long(t % 60));
  return buf;
}

}  // namespace

Progress::Progress(std::FILE* out, bool terminal, double log_interval_s)
    : out_(out), terminal_(terminal), interval_s_(log_interval_s) {}

void Progress::show(double fraction, const std::string& text, double elapsed_s, bool last) {
  if (terminal_) {
    constexpr int kWidth = 24;
    std::string bar(size_t(std::clamp(int(double(kWidth) * fraction), 0, kWidth)), '#');
    bar.resize(kWidth, '.');
    bar_width_ = std::fprintf(out_, "\r[%s] %s   ", bar.c_str(), text.c_str()) - 1;
  } else if (last_line_s_ < 0 || elapsed_s - last_line_s_ >= interval_s_ || last) {
    std::fprintf(out_, "%s\n", text.c_str());
    last_line_s_ = elapsed_s;
  }
  std::fflush(out_);
}

void Progress::step(int64_t step, int64_t total, double loss, double tokens_per_s, double eta_s, double elapsed_s,
                    double fraction) {
  if (fraction < 0) fraction = total > 0 ? double(step) / double(total) : 0;
  char text[160];
  if (terminal_)
    std::snprintf(text, sizeof text, "step %ld/%ld | loss %.4f | %.0f tok/s | ETA %s", long(step), long(total), loss,
                  tokens_per_s, format_duration(eta_s).c_str());
  else
    std::snprintf(text, sizeof text, "step %ld/%ld | loss %.4f | %.0f tok/s | elapsed %s | ETA %s", long(step),
                  long(total), loss, tokens_per_s, format_duration(elapsed_s).c_str(), format_duration(eta_s).c_str());
  show(fraction, text, elapsed_s, step == total || fraction >= 1);
}

void Progress::task(const std::string& what, int64_t done, int64_t total, double elapsed_s, const std::string& detail) {
  const double fraction = total > 0 ? double(done) / double(total) : 1;
  const double eta_s = done > 0 ? elapsed_s * double(total - done) / double(done) : 0;
  char text[256];
  std::snprintf(text, sizeof text, "%s %ld/%ld%s%s | elapsed %s | ETA %s", what.c_str(), long(done), long(total),
                detail.empty() ? "" : " | ", detail.c_str(), format_duration(elapsed_s).c_str(),
                done > 0 ? format_duration(eta_s).c_str() : "?");
  show(fraction, text, elapsed_s, done == total);
}

void Progress::validation(int64_t step, int64_t total, double train_loss, double val_loss, double elapsed_s) {
  char line[160];
  std::snprintf(line, sizeof line, "step %ld/%ld | train loss %.4f | val loss %.4f | elapsed %s", long(step),
                long(total), train_loss, val_loss, format_duration(elapsed_s).c_str());
  // On a terminal the line takes the bar's place (padded over it); the bar comes back on the next line.
  if (bar_width_ > 0) std::fprintf(out_, "\r%-*s\n", bar_width_, line);
  else std::fprintf(out_, "%s\n", line);
  bar_width_ = 0;
  std::fflush(out_);
}

void Progress::finish() {
  if (bar_width_ > 0) std::fputc('\n', out_);
  bar_width_ = 0;
  std::fflush(out_);
}

}  // namespace uoe::nn
