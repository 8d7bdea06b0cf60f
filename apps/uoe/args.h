// Command-line flags of the uoe program: --name value pairs and boolean switches, with clear errors.
#pragma once
#include <map>
#include <set>
#include <string>
#include <vector>

namespace uoe::cli {

class Args {
 public:
  // argv after the subcommand; `switches` are flags without a value; every flag must be in `known`. Errors name
  // the flag (main prefixes them with "uoe <command>: ").
  Args(const std::vector<std::string>& argv, const std::set<std::string>& known,
       const std::set<std::string>& switches = {});
  bool has(const std::string& name) const { return values_.count(name) > 0; }
  std::string str(const std::string& name, const std::string& def) const;
  std::string required(const std::string& name) const;
  int64_t integer(const std::string& name, int64_t def) const;
  double number(const std::string& name, double def) const;
  bool flag(const std::string& name) const { return has(name); }

 private:
  std::map<std::string, std::string> values_;
};

}  // namespace uoe::cli
