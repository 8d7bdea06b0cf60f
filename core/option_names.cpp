// The process's option namer (set once by a program at start-up, read by every message that names a setting).
#include "core/option_names.h"

#include <utility>

namespace uoe {
namespace {

OptionNamer& namer() {
  static OptionNamer installed;
  return installed;
}

}  // namespace

void set_option_namer(OptionNamer n) { namer() = std::move(n); }

std::string option_name(const std::string& field) {
  if (namer())
    if (std::optional<std::string> name = namer()(field)) return *std::move(name);
  return field;
}

}  // namespace uoe
