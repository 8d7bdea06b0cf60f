// Flag values: typed parsing with errors that name the flag, and the table's defaults.
#include "flags.h"

#include <charconv>
#include <cmath>

#include "core/error.h"

namespace uoe::cli {

std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

namespace {

// Parses the whole value of --name with `parse` (std::stoll or std::stod), else the error names the flag.
template <typename T, typename Parse>
T parse_whole(const std::string& name, const std::string& value, const char* what, Parse parse) {
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

}  // namespace

int64_t parse_integer(const std::string& name, const std::string& value) {
  return parse_whole<int64_t>(name, value, "an integer",
                              [](const std::string& s, size_t* used) { return std::stoll(s, used); });
}

double parse_number(const std::string& name, const std::string& value) {
  const double v = parse_whole<double>(name, value, "a number",
                                       [](const std::string& s, size_t* used) { return std::stod(s, used); });
  UOE_CHECK(std::isfinite(v), "--", name, " expects a finite number, got '", value, "'");
  return v;
}

Args::Args(const std::vector<Flag>& table, std::map<std::string, std::string> given) : given_(std::move(given)) {
  for (const Flag& f : table) table_[f.name] = &f;
}

const Flag& Args::spec(const std::string& name) const {
  auto it = table_.find(name);
  UOE_CHECK(it != table_.end(), "internal: --", name, " is not in this command's flag table");
  return *it->second;
}

std::string Args::str(const std::string& name) const {
  const Flag& f = spec(name);
  auto it = given_.find(name);
  return it != given_.end() ? it->second : f.default_value;
}

std::string Args::required(const std::string& name) const {
  spec(name);
  UOE_CHECK(has(name), "--", name, " is required");
  return given_.at(name);
}

int64_t Args::integer(const std::string& name) const { return parse_integer(name, str(name)); }

double Args::number(const std::string& name) const { return parse_number(name, str(name)); }

std::vector<std::string> Args::list(const std::string& name) const {
  std::vector<std::string> values;
  if (!has(name)) return values;
  const std::string& joined = given_.at(name);
  for (size_t begin = 0;;) {
    const size_t end = joined.find(kRepeatedSeparator, begin);
    values.push_back(joined.substr(begin, end - begin));
    if (end == std::string::npos) return values;
    begin = end + 1;
  }
}

int64_t Args::integer_or(const std::string& name, int64_t fallback) const {
  return has(name) ? integer(name) : fallback;
}

}  // namespace uoe::cli
