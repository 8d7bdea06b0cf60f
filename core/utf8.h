// UTF-8 validation (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF.
#pragma once
#include <cstddef>
#include <string>

namespace uoe {

// Length (1 to 4) of the valid UTF-8 sequence starting at s[i], or 0 when it is not valid.
size_t utf8_length(const std::string& s, size_t i);

}  // namespace uoe
