// metrics.jsonl: opened for appending with every write checked (a full disk used to leave a run that reported
// success with its metrics silently cut short), and repaired when a run resumes.
#include "nn/metrics_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <sstream>
#include <system_error>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/option_names.h"

namespace uoe::nn {
namespace {

std::string errno_text(int e) { return std::system_category().message(e); }

// The lines of the file at `path` (none when it is missing) that are whole JSON objects of steps <= `step`.
std::string lines_up_to(const std::string& path, int64_t step) {
  if (::access(path.c_str(), F_OK) != 0) return "";
  std::istringstream in(read_file_bytes(path));
  std::string line, kept;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    try {
      if (json::parse(line, path).at("step").as_int() <= step) kept += line + "\n";
    } catch (const Error&) {
      // a line torn by the crash that is being resumed from: dropped
    }
  }
  return kept;
}

}  // namespace

MetricsLog::MetricsLog(const std::string& path, bool truncate) : path_(path) {
  // O_NONBLOCK: a FIFO without a reader is an error, not a wait; writes block again once it is open.
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK | (truncate ? O_TRUNC : 0), 0666);
  UOE_CHECK(fd_ >= 0, "[train] cannot open '", path, "' for the metrics: ", errno_text(errno));
  const int flags = ::fcntl(fd_, F_GETFL);
  if (flags < 0 || ::fcntl(fd_, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(fd_);
    fail("[train] cannot open '", path, "' for the metrics: ", errno_text(e));
  }
}

MetricsLog MetricsLog::fresh(const std::string& path) { return MetricsLog(path, true); }

MetricsLog MetricsLog::resumed(const std::string& path, int64_t step) {
  write_file_atomic(path, lines_up_to(path, step));
  return MetricsLog(path, false);
}

MetricsLog::MetricsLog(MetricsLog&& other) noexcept : path_(std::move(other.path_)), fd_(other.fd_) {
  other.fd_ = -1;
}

MetricsLog::~MetricsLog() {
  if (fd_ >= 0) ::close(fd_);
}

void MetricsLog::append(const json::Value& line) {
  UOE_CHECK(fd_ >= 0, "[train] '", path_, "' is closed after an earlier write failed");
  const std::string text = line.dump() + "\n";
  const off_t end = ::lseek(fd_, 0, SEEK_END);  // where the line starts (appends go to the end)
  for (size_t done = 0; done < text.size();) {
    const ssize_t n = ::write(fd_, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      const bool torn = done > 0 && (end < 0 || ::ftruncate(fd_, end) != 0);  // a device cannot be cut
      ::close(fd_);
      fd_ = -1;
      fail("[train] cannot write '", path_, "': ", errno_text(e), " (the line of step ",
           line.contains("step") ? line.at("step").dump() : std::string("?"), ")",
           torn ? "; its partial line stays at the end of the file, " + option_name("TrainOptions::resume") +
                      " drops it"
                : "");
    }
    done += size_t(n);
  }
}

}  // namespace uoe::nn
