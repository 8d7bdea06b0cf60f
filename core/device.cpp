// Device parsing and printing.
#include "core/device.h"

#include "core/error.h"

namespace uoe {

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string idx = s.substr(5);
    UOE_CHECK(!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos,
              "[device] bad device string '", s, "': expected cpu, cuda or cuda:N");
    return cuda(std::stoi(idx));
  }
  fail("[device] bad device string '", s, "': expected cpu, cuda or cuda:N");
}

std::string Device::str() const {
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}

}  // namespace uoe
