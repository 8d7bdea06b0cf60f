// uoe: train, evaluate, sample from and inspect Mixture-of-Experts language models. Each command's flags come from
// its table (command_table.cpp): CLI11 parses them and prints them as help.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "core/error.h"
#include "core/option_names.h"

namespace uoe::cli {
namespace {

const char* kPresets =
    "presets: <family>-<kind>, families tiny (a laptop CPU), small (~124M active), 1b, 3b; kinds uoe, moe, aoe,\n"
    "         dense (e.g. tiny-uoe, small-moe, 3b-uoe); `uoe info --config <preset>` prints sizes and memory\n"
    "docs: README.md, docs/GUIDE.md (a tour of every command)\n";

const char* type_name(FlagType t) {
  switch (t) {
    case FlagType::Integer: return "INT";
    case FlagType::Number: return "NUMBER";
    case FlagType::Text: return "TEXT";
    case FlagType::Repeated: return "TEXT (repeatable)";
    case FlagType::Switch: break;
  }
  return "";
}

// The flag's type, checked as CLI11 reads the value: a bad one is one error naming the flag and the type expected.
CLI::Validator type_check(const Flag& f) {
  return CLI::Validator(
      [&f](std::string& value) {
        if (f.type == FlagType::Integer) parse_integer(f.name, value);
        if (f.type == FlagType::Number) parse_number(f.name, value);
        return std::string();
      },
      "");
}

// The CLI11 parser of one command, built from its flag table; help shows each flag's type, default and meaning.
std::unique_ptr<CLI::App> make_app(const Command& c) {
  auto app = std::make_unique<CLI::App>(c.summary, "uoe " + c.name);
  app->allow_extras();  // unknown flags are reported by parse_flags, naming the command's flags
  app->footer("Example:\n  " + c.example + "\n");
  app->get_formatter()->column_width(36);
  for (const Flag& f : c.flags) {
    if (f.type == FlagType::Switch) {
      app->add_flag("--" + f.name, f.help);
      continue;
    }
    // A required flag is checked when the command reads it (Args::required), after any unknown flag is reported.
    CLI::Option* o = app->add_option("--" + f.name, f.help);
    o->type_name(type_name(f.type) + std::string(f.required ? " REQUIRED" : ""))->default_str(f.default_value);
    o->multi_option_policy(f.type == FlagType::Repeated ? CLI::MultiOptionPolicy::TakeAll
                                                         : CLI::MultiOptionPolicy::TakeLast)
        ->check(type_check(f));
  }
  return app;
}

std::string help_of(const Command& c) { return make_app(c)->help(); }

// Every command, its summary and example; with `full`, each command's flags as well.
std::string overview(bool full) {
  std::string s = "usage: uoe <command> [flags]   (uoe help <command>, or uoe <command> --help: its flags)\n\n";
  for (const Command& c : commands()) {
    char line[256];
    std::snprintf(line, sizeof line, "  %-8s %s\n", c.name.c_str(), c.summary.c_str());
    s += line;
  }
  s += std::string("\n") + kPresets;
  if (full)
    for (const Command& c : commands()) s += "\n" + help_of(c);
  return s;
}

const Command* find_command(const std::string& name) {
  for (const Command& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

std::string flag_list(const Command& c) {
  std::string s;
  for (const Flag& f : c.flags) s += (s.empty() ? "--" : ", --") + f.name;
  return s;
}

// The flags of `argv` (after the command's name) by the command's table; nullopt when help was asked for (and
// printed). Errors name the flag.
std::optional<Args> parse_flags(const Command& c, const std::vector<std::string>& argv) {
  const auto app = make_app(c);
  std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11's order for a vector
  try {
    app->parse(reversed);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app->help().c_str(), stdout);
    return std::nullopt;
  } catch (const CLI::ArgumentMismatch& e) {
    const std::string what = e.what();
    fail("flag ", what.substr(0, what.find(':')), " needs a value");
  } catch (const CLI::ParseError& e) {
    fail(e.what(), " (uoe ", c.name, " --help lists the flags)");
  }
  const std::vector<std::string> extra = app->remaining();
  if (!extra.empty()) {
    UOE_CHECK(extra[0].rfind('-', 0) == 0, "unexpected argument '", extra[0], "' (flags start with --)");
    fail("unknown flag ", extra[0], " (this command takes ", flag_list(c), "; uoe ", c.name,
         " --help explains them)");
  }
  std::map<std::string, std::string> given;
  for (const Flag& f : c.flags) {
    const CLI::Option* o = app->get_option("--" + f.name);
    if (o->count() == 0) continue;
    if (f.type == FlagType::Repeated) {
      std::string joined;
      for (const std::string& v : o->as<std::vector<std::string>>()) {
        UOE_CHECK(v.find(kRepeatedSeparator) == std::string::npos, "--", f.name, " '", v, "' holds a line break");
        joined += (joined.empty() ? "" : std::string(1, kRepeatedSeparator)) + v;
      }
      given[f.name] = joined;
    } else {
      given[f.name] = f.type == FlagType::Switch ? "1" : o->as<std::string>();
    }
  }
  return Args(c.flags, std::move(given));
}

// `uoe help [command]`.
int print_help(const std::vector<std::string>& rest) {
  if (rest.empty()) {
    std::fputs(overview(true).c_str(), stdout);
    return 0;
  }
  const Command* c = find_command(rest[0]);
  if (!c) {
    std::fprintf(stderr, "uoe help: unknown command '%s'\n%s", rest[0].c_str(), overview(false).c_str());
    return 2;
  }
  std::fputs(help_of(*c).c_str(), stdout);
  return 0;
}

int run(const std::string& name, const std::vector<std::string>& rest) {
  if (name == "help" || name == "--help" || name == "-h") return print_help(rest);
  const Command* c = find_command(name);
  if (!c) {
    std::fprintf(stderr, "uoe: unknown command '%s'\n%s", name.c_str(), overview(false).c_str());
    return 2;
  }
  const std::optional<Args> args = parse_flags(*c, rest);
  return args ? c->run(*args) : 0;
}

}  // namespace
}  // namespace uoe::cli

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(uoe::cli::overview(false).c_str(), stderr);
    return 2;
  }
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // lines reach a log or pipe in order with stderr's errors
  uoe::set_option_namer(uoe::cli::flag_of_option);  // the library's messages name our flags, not its fields
  const std::string cmd = argv[1];
  try {
    return uoe::cli::run(cmd, std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::bad_alloc&) {  // an allocation outside the tensor allocator (which names its sizes)
    std::fprintf(stderr, "uoe %s: out of memory (std::bad_alloc): the sizes asked for need more memory than this "
                 "machine has; `uoe info --config <preset|file.json> --batch B --seq T` estimates what training needs\n",
                 cmd.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "uoe %s: %s\n", cmd.c_str(), e.what());
    return 1;
  }
}
