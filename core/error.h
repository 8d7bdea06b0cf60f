// Error: the one exception type of the library, and the checks that raise it.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>

namespace uoe {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates its arguments with operator<< and throws uoe::Error.
template <typename... Args>
[[noreturn]] void fail(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}

}  // namespace uoe

#define UOE_CHECK(cond, ...)             \
  do {                                   \
    if (!(cond)) ::uoe::fail(__VA_ARGS__); \
  } while (0)
