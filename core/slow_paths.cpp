// Slow-path counters (core/slow_paths.h): a map under one mutex. Only slow paths count, so its cost is beside
// theirs.
#include "core/slow_paths.h"

#include <map>
#include <mutex>

namespace uoe::slow_paths {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, Entry> entries;
};

Registry& registry() {
  static Registry* r = new Registry();  // never destroyed: ops may count during static destruction
  return *r;
}

}  // namespace

void count(const std::string& name, const std::string& what) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  Entry& e = r.entries[name];
  if (e.count++ == 0) {
    e.name = name;
    e.what = what;
  }
}

std::vector<Entry> snapshot() {
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  std::vector<Entry> out;
  for (const auto& [name, e] : r.entries) out.push_back(e);
  return out;
}

Report::Report() : baseline_(snapshot()) {}

std::vector<Entry> Report::since_start() const {
  std::vector<Entry> out;
  for (Entry e : snapshot()) {
    for (const Entry& b : baseline_)
      if (b.name == e.name) e.count -= b.count;
    if (e.count > 0) out.push_back(std::move(e));
  }
  return out;
}

json::Value Report::counts() const {
  json::Value v = json::Value::object();
  for (const Entry& e : since_start()) v[e.name] = e.count;
  return v;
}

std::vector<std::string> Report::new_warnings(const std::string& who) {
  std::vector<std::string> lines;
  for (const Entry& e : since_start())
    if (warned_.insert(e.name).second) lines.push_back(who + " warning: slow path " + e.name + ": " + e.what);
  return lines;
}

}  // namespace uoe::slow_paths
