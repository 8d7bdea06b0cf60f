// The collective watchdog: a rank that stops answering (hung, stopped, on a node that no longer responds) throws
// nothing, so run_or_abort cannot end the run, and every other rank would wait for it in a collective forever.
// The watchdog ends a process whose collective has not completed within the timeout; the launcher (mpirun,
// srun) then ends the other ranks.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace uoe::watchdog {

// Seconds a collective may take before the process ends (exit code 1) with a message naming the collective and
// the rank that waited. 0 turns the watchdog off. Default 1800 s: longer than any step, evaluation or checkpoint
// save that the other ranks may legitimately wait for.
void set_timeout(double seconds);
double timeout();

// While alive: the calling thread is blocked in the collective `what` (e.g. "[all_reduce] rank 0 of 2: MPI_Wait").
class Blocking {
 public:
  explicit Blocking(std::string what);
  ~Blocking();
  Blocking(const Blocking&) = delete;
  Blocking& operator=(const Blocking&) = delete;

 private:
  uint64_t id_;
};

// While alive: no collective times out (waits end when it dies are counted from then). For one-off work of one rank
// that the others wait for in a collective and that may take longer than any step, such as rank 0 tokenising a
// large corpus; every rank holds one over the same stretch.
class Paused {
 public:
  Paused();
  ~Paused();
  Paused(const Paused&) = delete;
  Paused& operator=(const Paused&) = delete;
};

// A collective that completes by itself (queued on a GPU stream): `done` is polled from the watchdog's thread
// until it returns true, and must stay callable until then.
void watch(std::string what, std::function<bool()> done);

}  // namespace uoe::watchdog
