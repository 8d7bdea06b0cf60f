// The collective watchdog (core/collective_watchdog.h): one thread, started with the first watched collective,
// checks twice a second what is pending.
#include "core/collective_watchdog.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "core/error.h"

namespace uoe::watchdog {
namespace {

using Clock = std::chrono::steady_clock;

struct Pending {
  std::string what;
  Clock::time_point since;
  std::function<bool()> done;  // empty for a Blocking scope (done when it ends)
};

struct State {
  std::mutex mu;
  std::map<uint64_t, Pending> pending;
  uint64_t next_id = 0;
  bool thread_started = false;
  int paused = 0;                  // live Paused scopes
  Clock::time_point resumed_at{};  // when the last one ended: waits count from then at the earliest
};

std::atomic<double> g_timeout{1800.0};

// Never destroyed: the detached thread may look at it while the process exits.
State& state() {
  static auto* s = new State();
  return *s;
}

[[noreturn]] void expire(const Pending& p, double waited) {
  std::fprintf(stderr,
               "uoe: %s has not completed after %.0f s (collective timeout %.0f s): another rank stopped answering "
               "(hung, stopped, or its node is unreachable); ending this rank, and the launcher ends the others\n",
               p.what.c_str(), waited, g_timeout.load());
  std::fflush(nullptr);
  std::_Exit(1);
}

void check_loop() {
  State& s = state();
  for (;;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // The polls run without the lock (a blocked one must not block the ranks' collectives), and what finished is
    // destroyed without it too (a GPU event's destruction may wait).
    std::vector<std::pair<uint64_t, std::function<bool()>>> polls;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      for (const auto& [id, p] : s.pending)
        if (p.done) polls.emplace_back(id, p.done);
    }
    std::vector<uint64_t> finished;
    for (const auto& [id, done] : polls)
      if (done()) finished.push_back(id);
    std::vector<Pending> released;
    {
      std::lock_guard<std::mutex> lock(s.mu);
      for (uint64_t id : finished) {
        auto it = s.pending.find(id);  // only this thread erases polled entries
        released.push_back(std::move(it->second));
        s.pending.erase(it);
      }
      const double limit = g_timeout.load();
      const Clock::time_point now = Clock::now();
      for (const auto& [id, p] : s.pending) {
        const double waited = std::chrono::duration<double>(now - std::max(p.since, s.resumed_at)).count();
        if (limit > 0 && s.paused == 0 && waited > limit) expire(p, waited);
      }
    }
  }
}

uint64_t add(std::string what, std::function<bool()> done) {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.thread_started) {
    std::thread(check_loop).detach();
    s.thread_started = true;
  }
  const uint64_t id = s.next_id++;
  s.pending.emplace(id, Pending{std::move(what), Clock::now(), std::move(done)});
  return id;
}

}  // namespace

void set_timeout(double seconds) {
  UOE_CHECK(seconds >= 0, "[collective timeout] must be >= 0 seconds (0 turns it off), got ", seconds);
  g_timeout.store(seconds);
}

double timeout() { return g_timeout.load(); }

Blocking::Blocking(std::string what) : id_(add(std::move(what), nullptr)) {}

Blocking::~Blocking() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.pending.erase(id_);
}

Paused::Paused() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  ++s.paused;
}

Paused::~Paused() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (--s.paused == 0) s.resumed_at = Clock::now();
}

void watch(std::string what, std::function<bool()> done) { add(std::move(what), std::move(done)); }

}  // namespace uoe::watchdog
