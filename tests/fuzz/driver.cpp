// The fuzz driver: the campaign loop, outcome classification, and the hooks that report a dying input.
#include "driver.h"

#include <cxxabi.h>
#include <time.h>
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

// The input being run, as the hooks of a dying process print it (formatted before the input runs: they may only
// make async-signal-safe calls). Its bytes are already on disk: the campaign saves each input while it runs.
char g_current_message[4096] = {};

void report_current(const char* what) {
  for (const char* text : {what, static_cast<const char*>(g_current_message)}) {
    for (size_t n = std::strlen(text); n > 0;) {
      const ssize_t w = ::write(2, text, n);
      if (w <= 0) break;
      text += w;
      n -= size_t(w);
    }
  }
}

void on_fatal_signal(int sig) {
  report_current(sig == SIGALRM ? "\n[fuzz] HANG: one input ran past the time limit\n" : "\n[fuzz] CRASH\n");
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

#ifdef UOE_FUZZ_ASAN
void on_sanitizer_death() { report_current("\n[fuzz] CRASH: the sanitizer report above\n"); }
#endif

// Hooks that name the input a dying process was running, for a campaign's duration: SIGALRM (the hang watchdog);
// AddressSanitizer's death callback, or without it the fatal signals. (GCC's UndefinedBehaviorSanitizer has its own
// runtime, which does not call that callback: its reports are followed by no line, and the saved input tells.)
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
    g_current_message[0] = '\0';
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

// The CPU time of this thread: unlike the wall clock, it does not count the time a loaded machine (CI runs tests
// in parallel) keeps the process waiting.
double thread_cpu_seconds() {
  struct timespec ts {};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

int64_t peak_rss_bytes() {
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  return int64_t(ru.ru_maxrss) * 1024;
}

}  // namespace

std::string run_one(const Target& target, const std::string& bytes) {
  const int64_t rss_before = peak_rss_bytes();
  const double cpu_before = thread_cpu_seconds();
  ::alarm(kHangSeconds);
  std::string what = classify(target, bytes);
  ::alarm(0);
  const double seconds = thread_cpu_seconds() - cpu_before;
  const int64_t rss_growth = peak_rss_bytes() - rss_before;
  if (what.empty() && seconds > kSlowInputSeconds)
    what = "slow: the input took " + std::to_string(seconds) + " s of CPU time (the limit is " +
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
  const std::string prefix = dir + "/" + target.format + "-seed" + std::to_string(seed) + "-input";
  std::fprintf(stderr, "[fuzz] %s: seed %llu; each input is saved as %s<index>.bin while it runs, so a crash, a "
               "sanitizer report or a hang leaves it there\n", target.format, (unsigned long long)seed, prefix.c_str());
  for (int64_t i = 0; i < inputs && c.findings.size() < 10; ++i) {
    Mutator mutator(input_seed(seed, i));
    const std::string input = mutator.mutate(corpus);
    const std::string path = prefix + std::to_string(i) + ".bin";
    std::snprintf(g_current_message, sizeof g_current_message,
                  "[fuzz] format %s, seed %llu, input %lld, saved as %s (replay: uoe_fuzz replay %s %s)\n",
                  target.format, (unsigned long long)seed, (long long)i, path.c_str(), target.format, path.c_str());
    write_bytes(path, input);
    const std::string what = run_one(target, input);
    if (what.empty())
      std::filesystem::remove(path);
    else
      c.findings.push_back({i, what, path});
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
