// metrics.jsonl, the training run's stream of one JSON object per step: appended as each step ends, every write
// checked.
#pragma once
#include <cstdint>
#include <string>

#include "core/json.h"

namespace uoe::nn {

class MetricsLog {
 public:
  // A new run: `path` is emptied (created if missing).
  static MetricsLog fresh(const std::string& path);
  // A run resumed from its checkpoint at `step`: the lines of steps <= step are kept, those after it (the steps
  // being redone) dropped, and so is a line torn by the crash being resumed from.
  static MetricsLog resumed(const std::string& path, int64_t step);

  // Appends `line` and a newline. A write that fails (a full disk) is an error naming the file and the step's
  // line; the part of the line that was written is cut off again where the file allows it, so the file holds whole
  // lines. The error is final: nothing more is written.
  void append(const json::Value& line);

  const std::string& path() const { return path_; }
  MetricsLog(MetricsLog&& other) noexcept;
  MetricsLog& operator=(MetricsLog&&) = delete;
  MetricsLog(const MetricsLog&) = delete;
  ~MetricsLog();

 private:
  MetricsLog(const std::string& path, bool truncate);
  std::string path_;
  int fd_ = -1;
};

}  // namespace uoe::nn
