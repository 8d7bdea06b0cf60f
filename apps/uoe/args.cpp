// Command-line flag parsing.
#include "args.h"

#include <cmath>

#include "core/error.h"

namespace uoe::cli {

Args::Args(const std::vector<std::string>& argv, const std::set<std::string>& known,
           const std::set<std::string>& switches) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    UOE_CHECK(a.rfind("--", 0) == 0, "unexpected argument '", a, "' (flags start with --)");
    const std::string name(a.begin() + 2, a.end());
    if (!known.count(name) && !switches.count(name)) {
      std::string flags;
      for (const std::set<std::string>* set : {&known, &switches})
        for (const std::string& f : *set) flags += (flags.empty() ? "--" : ", --") + f;
      fail("unknown flag --", name, " (this command takes ", flags, ")");
    }
    if (switches.count(name)) {
      values_[name] = std::string(1, '1');  // not = "1": g++ 12 -Wrestrict false positive
      continue;
    }
    UOE_CHECK(i + 1 < argv.size(), "flag --", name, " needs a value");
    values_[name] = argv[++i];
  }
}

std::string Args::str(const std::string& name, const std::string& def) const {
  auto it = values_.find(name);
  return it == values_.end() ? def : it->second;
}

std::string Args::required(const std::string& name) const {
  auto it = values_.find(name);
  UOE_CHECK(it != values_.end(), "--", name, " is required");
  return it->second;
}

// Parses the whole value of --name with `parse` (std::stoll or std::stod), else the error names the flag.
template <typename T, typename Parse>
T parse_flag(const std::string& name, const std::string& value, const char* what,
             Parse parse) {
  size_t used = 0;
  T v{};
  try {
    v = parse(value, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  UOE_CHECK(used == value.size() && used > 0, "--", name, " expects ", what, ", got '", value, "'");
  return v;
}

int64_t Args::integer(const std::string& name, int64_t def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  return parse_flag<int64_t>(name, it->second, "an integer",
                             [](const std::string& s, size_t* used) { return std::stoll(s, used); });
}

double Args::number(const std::string& name, double def) const {
  auto it = values_.find(name);
  if (it == values_.end()) return def;
  const double v = parse_flag<double>(name, it->second, "a number",
                                     [](const std::string& s, size_t* used) { return std::stod(s, used); });
  UOE_CHECK(std::isfinite(v), "--", name, " expects a finite number, got '", it->second, "'");
  return v;
}

}  // namespace uoe::cli
