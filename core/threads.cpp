// The idle-core count behind the default thread count: /proc/stat's per-core times, sampled twice.
#include "threads.h"

#include <omp.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "error.h"

namespace uoe {
namespace {

// Jiffies one core has spent idle (idle + iowait) and in all (user .. steal).
struct CoreTimes {
  int core = -1;
  double idle = 0, total = 0;
};

// The cores of `cpus` as /proc/stat lists them ("cpuN user nice system idle iowait irq softirq steal ...").
std::vector<CoreTimes> read_core_times(const cpu_set_t& cpus) {
  std::vector<CoreTimes> cores;
  std::ifstream stat("/proc/stat");
  std::string line;
  while (std::getline(stat, line)) {
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || line[3] < '0' || line[3] > '9') continue;
    std::istringstream fields(line.substr(3));
    CoreTimes t;
    fields >> t.core;
    if (t.core < 0 || t.core >= CPU_SETSIZE || !CPU_ISSET(t.core, &cpus)) continue;
    for (int field = 0; field < 8; ++field) {
      double jiffies = 0;
      if (!(fields >> jiffies)) break;
      t.total += jiffies;
      if (field == 3 || field == 4) t.idle += jiffies;
    }
    cores.push_back(t);
  }
  return cores;
}

}  // namespace

int idle_cores() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  if (sched_getaffinity(0, sizeof(cpus), &cpus) != 0) return omp_get_num_procs();
  const int in_set = CPU_COUNT(&cpus);
  const std::vector<CoreTimes> before = read_core_times(cpus);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const std::vector<CoreTimes> after = read_core_times(cpus);
  if (before.empty() || before.size() != after.size()) return in_set;
  double idle = 0;  // in cores
  for (size_t i = 0; i < before.size(); ++i) {
    const double total = after[i].total - before[i].total;
    idle += total > 0 ? (after[i].idle - before[i].idle) / total : 1.0;
  }
  return std::clamp(int(std::lround(idle)), 1, in_set);
}

int set_cpu_threads(int threads) {
  UOE_CHECK(threads >= 0, "set_cpu_threads: the thread count must be >= 0 (0: the default), got ", threads);
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (threads == 0 && env != nullptr && *env != '\0') return omp_get_max_threads();  // OpenMP read it at start-up
  omp_set_num_threads(threads > 0 ? threads : idle_cores());
  return omp_get_max_threads();
}

}  // namespace uoe
