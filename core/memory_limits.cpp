// host_memory_limits: /proc/meminfo, the cgroup (v2 memory.max or v1 memory.limit_in_bytes, each ancestor up to
// the mount's root) and getrlimit(RLIMIT_AS) against /proc/self/status's VmSize.
#include "core/memory_limits.h"

#include <sys/resource.h>

#include <fstream>
#include <sstream>

namespace uoe {
namespace {

std::optional<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// A number of bytes in a cgroup file; "max" (v2) or a value past 2^60 (v1's "no limit") is none.
std::optional<double> limit_bytes(const std::string& path) {
  const std::optional<std::string> text = read_text(path);
  if (!text || text->rfind("max", 0) == 0) return std::nullopt;
  try {
    const double v = std::stod(*text);
    return v < 0x1p60 ? std::optional(v) : std::nullopt;
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

// "key: value unit" lines (/proc/meminfo, /proc/self/status): the value of `key` in kB, as bytes.
std::optional<double> kb_field(const std::string& text, const std::string& key) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) * 1024;
  return std::nullopt;
}

// The tightest cgroup limit from the process's cgroup `path` up to `root` (limit - usage, page cache that can be
// reclaimed not counted as used).
void add_cgroup_limit(const std::string& root, std::string path, const char* limit_file, const char* usage_file,
                      const char* inactive_field, std::vector<MemoryLimit>& out) {
  std::optional<MemoryLimit> tightest;
  while (true) {
    const std::string dir = root + (path == "/" ? "" : path);
    const std::optional<double> limit = limit_bytes(dir + "/" + limit_file);
    const std::optional<double> usage = limit_bytes(dir + "/" + usage_file);
    if (limit && usage) {
      const double inactive = memory_stat_field(read_text(dir + "/memory.stat").value_or(""), inactive_field);
      const double room = *limit - (*usage - inactive);
      if (!tightest || room < tightest->room)
        tightest = MemoryLimit{room, "the cgroup limit (" + dir + "/" + limit_file + ")", true};
    }
    if (path == "/" || path.empty()) break;
    const size_t slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  if (tightest) out.push_back(*tightest);
}

}  // namespace

std::optional<double> meminfo_available(const std::string& meminfo) { return kb_field(meminfo, "MemAvailable"); }

std::optional<std::string> cgroup_path(const std::string& proc_self_cgroup, const std::string& controller) {
  std::istringstream in(proc_self_cgroup);
  for (std::string line; std::getline(in, line);) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1);
    const bool match = controller.empty() ? line.rfind("0::", 0) == 0
                                          : ("," + controllers + ",").find("," + controller + ",") != std::string::npos;
    if (match) return line.substr(b + 1);
  }
  return std::nullopt;
}

double memory_stat_field(const std::string& memory_stat, const std::string& field) {
  std::istringstream in(memory_stat);
  for (std::string key; in >> key;) {
    double v = 0;
    if (!(in >> v)) break;
    if (key == field) return v;
  }
  return 0;
}

std::vector<MemoryLimit> host_memory_limits() {
  std::vector<MemoryLimit> out;
  if (const auto meminfo = read_text("/proc/meminfo"))
    if (const auto available = meminfo_available(*meminfo))
      out.push_back({*available, "MemAvailable of /proc/meminfo"});
  const std::string cgroups = read_text("/proc/self/cgroup").value_or("");
  if (const auto v2 = cgroup_path(cgroups, ""))
    add_cgroup_limit("/sys/fs/cgroup", *v2, "memory.max", "memory.current", "inactive_file", out);
  if (const auto v1 = cgroup_path(cgroups, "memory"))
    add_cgroup_limit("/sys/fs/cgroup/memory", *v1, "memory.limit_in_bytes", "memory.usage_in_bytes",
                     "total_inactive_file", out);
  rlimit as{};
  if (::getrlimit(RLIMIT_AS, &as) == 0 && as.rlim_cur != RLIM_INFINITY) {
    const double used = kb_field(read_text("/proc/self/status").value_or(""), "VmSize").value_or(0);
    out.push_back({double(as.rlim_cur) - used,
                   "ulimit -v: RLIMIT_AS less the " + std::to_string(int64_t(used / 1048576)) + " MiB mapped already",
                   false});
  }
  return out;
}

}  // namespace uoe
