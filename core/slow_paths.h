// Slow paths: process-wide named counters of the times an op took a slower route than its fast one (the scalar
// bf16 attention kernels, per-problem GEMMs instead of one grouped call), so that a run reports them instead of
// hiding them. The trainer puts the counts of its run in metrics.jsonl (`slow_paths`) and warns once per kind.
#pragma once
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "core/json.h"

namespace uoe::slow_paths {

// Counts one use of slow path `name`, a stable key such as "attention_bf16_scalar.head_dim". `what` says which op
// took it, why and what it costs; the first use's is kept (for the warning). Thread-safe.
void count(const std::string& name, const std::string& what);

struct Entry {
  std::string name;
  uint64_t count = 0;
  std::string what;  // the first use's
};
// Every slow path taken so far in this process, by name.
std::vector<Entry> snapshot();

// The slow paths taken since it was made (a run's): their counts, and one warning line per kind.
class Report {
 public:
  Report();
  // {name: count since construction} for each kind taken since; an empty object when none was.
  json::Value counts() const;
  // "<who> warning: slow path <name>: <what>" for each kind taken since construction that this report has not
  // returned a warning for yet.
  std::vector<std::string> new_warnings(const std::string& who);

 private:
  std::vector<Entry> since_start() const;
  std::vector<Entry> baseline_;
  std::set<std::string> warned_;
};

}  // namespace uoe::slow_paths
