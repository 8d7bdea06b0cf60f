// The flags of the uoe program: each declared once (name, type, default, meaning) in the table of its command
// (apps/uoe/command_table.cpp), which CLI11 parses and prints as help; a command reads its values through Args.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace uoe::cli {

enum class FlagType { Integer, Number, Text, Switch, Repeated };  // Repeated: text, given any number of times

struct Flag {
  std::string name;           // without the leading --
  FlagType type;
  std::string default_value;  // shown in help and used when the flag is absent; empty: none, or one the help explains
  std::string help;
  bool required = false;      // the command refuses to start without it
};

// The default of a number flag as help shows it: the shortest text that reads back as the same double.
std::string number_text(double v);

// The values of a Repeated flag travel joined by this separator (a value cannot hold it).
inline constexpr char kRepeatedSeparator = '\n';

// A command's parsed flags: values given on the command line, else the table's defaults. Type errors were raised
// while parsing, so the accessors only convert.
class Args {
 public:
  Args(const std::vector<Flag>& table, std::map<std::string, std::string> given);
  bool has(const std::string& name) const { return given_.count(name) > 0; }
  bool flag(const std::string& name) const { return has(name); }
  // The value given, else the table's default (possibly empty).
  std::string str(const std::string& name) const;
  // The value given, else one error saying that the flag is required.
  std::string required(const std::string& name) const;
  int64_t integer(const std::string& name) const;
  double number(const std::string& name) const;
  // For a flag whose default depends on the run (the table's is empty; help says what it is): the value given, else
  // `fallback`.
  int64_t integer_or(const std::string& name, int64_t fallback) const;
  // Every value of a Repeated flag, in the order given (none when absent).
  std::vector<std::string> list(const std::string& name) const;

 private:
  const Flag& spec(const std::string& name) const;
  std::map<std::string, const Flag*> table_;
  std::map<std::string, std::string> given_;
};

// Parses the whole of `value` as the flag's type, else one error naming the flag and the type expected.
int64_t parse_integer(const std::string& name, const std::string& value);
double parse_number(const std::string& name, const std::string& value);

}  // namespace uoe::cli
