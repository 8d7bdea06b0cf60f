// Command-line flag parsing.
#include "args.h"

#include "core/error.h"

namespace uoe::cli {

Args::Args(const std::string& command, const std::vector<std::string>& argv, const std::set<std::string>& known,
           const std::set<std::string>& switches)
    : command_(command) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    UOE_CHECK(a.rfind("--", 0) == 0, "uoe ", command, ": unexpected argument '", a, "' (flags start with --)");
    const std::string name(a.begin() + 2, a.end());
    UOE_CHECK(known.count(name) || switches.count(name), "uoe ", command, ": unknown flag --", name);
    if (switches.count(name)) {
      values_[name] = std::string(1, '1');  // not = "1": g++ 12 -Wrestrict false positive
      continue;
    }
    UOE_CHECK(i + 1 < argv.size(), "uoe ", command, ": flag --", name, " needs a value");
    values_[name] = argv[++i];
  }
}

std::string Args::str(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

std::string Args::required(const std::string& name) const {
  auto it = values_.find(name);
  UOE_CHECK(it != values_.end(), "uoe ", command_, ": --", name, " is required");
  return it->second;
}

int64_t Args::integer(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  UOE_CHECK(used == it->second.size() && used > 0, "uoe ", command_, ": --", name, " expects an integer, got '",
            it->second, "'");
  return v;
}

double Args::number(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  UOE_CHECK(used == it->second.size() && used > 0, "uoe ", command_, ": --", name, " expects a number, got '",
            it->second, "'");
  return v;
}

}  // namespace uoe::cli
