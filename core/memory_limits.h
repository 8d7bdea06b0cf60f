// The memory this process may still allocate, by each limit the system sets or reports: the free memory of the
// machine (MemAvailable), the cgroup's limit (a container, a Slurm job), the address-space limit (ulimit -v).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace uoe {

struct MemoryLimit {
  double room = 0;     // bytes this process may still allocate under the limit
  std::string source;  // what sets it, for messages: "MemAvailable of /proc/meminfo", ...
  bool shared = true;  // shared by the processes of the machine (or cgroup); false: this process's own
};

// Every limit that applies to this process now (none found: an empty list). Unlimited ones (ulimit -v unlimited,
// a cgroup without a limit) are left out: under AddressSanitizer, whose shadow memory takes terabytes of address
// space, RLIMIT_AS is unlimited.
std::vector<MemoryLimit> host_memory_limits();

// Parsers, exposed for tests. Bytes of "MemAvailable:" in /proc/meminfo's text.
std::optional<double> meminfo_available(const std::string& meminfo);
// The cgroup path of this process for `controller` ("memory" for cgroup v1; "" for the v2 unified line "0::")
// in /proc/self/cgroup's text.
std::optional<std::string> cgroup_path(const std::string& proc_self_cgroup, const std::string& controller);
// A field ("inactive_file", "total_inactive_file") of a cgroup's memory.stat text, 0 when absent.
double memory_stat_field(const std::string& memory_stat, const std::string& field);

}  // namespace uoe
