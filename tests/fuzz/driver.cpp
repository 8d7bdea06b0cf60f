// The fuzz driver: the campaign loop, outcome classification, and the hooks that report a dying input.
#include "driver.h"

#include <cxxabi.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <typeinfo>

#include "core/atomic_file.h"
#include "core/error.h"
#include "mutator.h"
#include "scratch.h"

#if defined(__SANITIZE_ADDRESS__)
#define UOE_FUZZ_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UOE_FUZZ_ASAN 1
#endif
#endif
#ifdef UOE_FUZZ_ASAN
#include <sanitizer/common_interface_defs.h>
#endif

namespace uoe::fuzz {
namespace {

// The input being run, for the hooks of a dying process: they save its bytes to `path` and print `message`,
// with async-signal-safe calls only (both strings are formatted before the input runs).
struct CurrentInput {
  const std::string* bytes = nullptr;
  char path[1024] = {};
  char message[4096] = {};
} g_current;

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0) return;
    p += w;
    n -= size_t(w);
  }
}

void save_and_report_current(const char* what) {
  if (!g_current.bytes) return;
  const int fd = ::open(g_current.path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd >= 0) {
    write_all(fd, g_current.bytes->data(), g_current.bytes->size());
    ::close(fd);
  }
  write_all(2, what, std::strlen(what));
  write_all(2, g_current.message, std::strlen(g_current.message));
}

void on_fatal_signal(int sig) {
  save_and_report_current(sig == SIGALRM ? "\n[fuzz] HANG: one input ran past the time limit\n"
                                         : "\n[fuzz] CRASH: a fatal signal\n");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

#ifdef UOE_FUZZ_ASAN
void on_sanitizer_death() { save_and_report_current("\n[fuzz] CRASH: the sanitizer report above\n"); }
#endif

// Installs the hooks for a campaign's duration: SIGALRM (the hang watchdog) always; the fatal signals in a build
// without AddressSanitizer, which otherwise reports them itself and then calls its death callback.
class DeathHooks {
 public:
  DeathHooks() {
    std::vector<int> signals = {SIGALRM};
#ifdef UOE_FUZZ_ASAN
    __sanitizer_set_death_callback(on_sanitizer_death);
#else
    signals.insert(signals.end(), {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT});
#endif
    for (int sig : signals) {
      struct sigaction sa {};
      sa.sa_handler = on_fatal_signal;
      sigemptyset(&sa.sa_mask);
      struct sigaction old {};
      ::sigaction(sig, &sa, &old);
      saved_.emplace_back(sig, old);
    }
  }
  ~DeathHooks() {
    ::alarm(0);
    for (const auto& [sig, old] : saved_) ::sigaction(sig, &old, nullptr);
#ifdef UOE_FUZZ_ASAN
    __sanitizer_set_death_callback(nullptr);
#endif
    g_current.bytes = nullptr;
  }
  DeathHooks(const DeathHooks&) = delete;
  DeathHooks& operator=(const DeathHooks&) = delete;

 private:
  std::vector<std::pair<int, struct sigaction>> saved_;
};

std::string demangled(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> name(abi::__cxa_demangle(type.name(), nullptr, nullptr, &status),
                                                     &std::free);
  return status == 0 && name ? name.get() : type.name();
}

}  // namespace

namespace {

std::string classify(const Target& target, const std::string& bytes) {
  try {
    target.run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    return "";
  } catch (const std::exception& e) {
    return demangled(typeid(e)) + ": " + e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

int64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;
}

}  // namespace

std::string run_one(const Target& target, const std::string& bytes) {
  const int64_t rss_before = peak_rss_bytes();
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  ::alarm(kHangSeconds);
  std::string what = classify(target, bytes);
  ::alarm(0);
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const int64_t rss_growth = peak_rss_bytes() - rss_before;
  if (what.empty() && seconds > kSlowInputSeconds)
    what = "slow: the input took " + std::to_string(seconds) + " s (the limit is " +
           std::to_string(kSlowInputSeconds) + " s)";
  if (what.empty() && rss_growth > kMaxMemoryGrowthBytes)
    what = "memory: the process's peak RSS grew by " + std::to_string(rss_growth >> 20) + " MiB (the limit is " +
           std::to_string(kMaxMemoryGrowthBytes >> 20) + " MiB)";
  return what;
}

uint64_t input_seed(uint64_t seed, int64_t index) { return seed * 0x9E3779B97F4A7C15ull + uint64_t(index); }

std::string findings_dir() {
  const char* env = std::getenv("UOE_FUZZ_FINDINGS");
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = env && *env ? env : std::string(tmp && *tmp ? tmp : "/tmp") + "/uoe-fuzz-findings";
  std::filesystem::create_directories(dir);
  return dir;
}

Campaign run_campaign(const Target& target, const std::vector<std::string>& corpus, int64_t inputs, uint64_t seed) {
  UOE_CHECK(!corpus.empty(), "[fuzz] ", target.format, ": the corpus is empty");
  const std::string dir = findings_dir();
  Campaign c;
  DeathHooks hooks;
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  for (int64_t i = 0; i < inputs && c.findings.size() < 10; ++i) {
    Mutator mutator(input_seed(seed, i));
    const std::string input = mutator.mutate(corpus);
    std::snprintf(g_current.path, sizeof g_current.path, "%s/%s-seed%llu-input%lld.bin", dir.c_str(), target.format,
                  (unsigned long long)seed, (long long)i);
    std::snprintf(g_current.message, sizeof g_current.message,
                  "[fuzz] format %s, seed %llu, input %lld; saved to %s (replay: uoe_fuzz replay %s %s)\n",
                  target.format, (unsigned long long)seed, (long long)i, g_current.path, target.format,
                  g_current.path);
    g_current.bytes = &input;
    const std::string what = run_one(target, input);
    if (!what.empty()) {
      write_bytes(g_current.path, input);
      c.findings.push_back({i, what, g_current.path});
    }
    ++c.inputs;
  }
  c.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return c;
}

std::vector<std::string> read_corpus(const std::string& dir) {
  UOE_CHECK(std::filesystem::is_directory(dir), "[fuzz] the corpus directory '", dir, "' does not exist");
  std::vector<std::string> paths;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    if (entry.is_regular_file()) paths.push_back(entry.path().string());
  std::sort(paths.begin(), paths.end());
  UOE_CHECK(!paths.empty(), "[fuzz] the corpus directory '", dir, "' holds no files");
  std::vector<std::string> files;
  for (const std::string& p : paths) files.push_back(read_file_bytes(p));
  return files;
}

}  // namespace uoe::fuzz
