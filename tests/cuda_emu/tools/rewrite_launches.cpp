// Build tool of the emulated CUDA backend (tests/cuda_emu): copies a CUDA source file with every kernel launch
// `kernel<<<grid, block, smem, stream>>>(args)` written as
// `::uoe::cuda_emu::launch_kernel([=](auto&&... a) { kernel(a...); }, grid, block, smem, stream)(args)`, the stand-in
// runtime's launch (tests/cuda_emu/include/cuda_emu/host.h), so that g++ compiles it; the lambda lets a kernel
// template deduce its arguments from the launch's, as CUDA's launch does.
// Nothing else changes, line breaks included, and a #line directive names the original file, so compiler messages
// point into cuda/. `<<<` after `//` on its line is a comment and stays.
//
//   uoe_emu_rewrite_launches <input> <output>
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace {

bool in_line_comment(const std::string& s, size_t pos) {
  const size_t line = s.rfind('\n', pos);
  const size_t comment = s.find("//", line == std::string::npos ? 0 : line + 1);
  return comment != std::string::npos && comment < pos;
}

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }

// Where the kernel expression ending just before `end` starts: a name, maybe qualified, maybe with template arguments.
size_t kernel_start(const std::string& s, size_t end) {
  size_t i = end;
  while (i > 0 && std::isspace(static_cast<unsigned char>(s[i - 1]))) --i;
  if (i > 0 && s[i - 1] == '>') {  // template arguments: back to the matching '<'
    int depth = 0;
    do {
      --i;
      if (s[i] == '>') ++depth;
      else if (s[i] == '<') --depth;
    } while (i > 0 && depth > 0);
  }
  while (i > 0 && name_char(s[i - 1])) --i;
  return i;
}

std::string rewrite(const std::string& s, const std::string& path) {
  std::string out;
  size_t copied = 0;
  for (size_t open = s.find("<<<"); open != std::string::npos; open = s.find("<<<", open + 3)) {
    if (in_line_comment(s, open)) continue;
    const size_t close = s.find(">>>", open);
    const size_t start = kernel_start(s, open);
    if (close == std::string::npos || start >= open || start < copied)
      throw std::runtime_error(path + ": a kernel launch this tool cannot read at offset " + std::to_string(open));
    out += s.substr(copied, start - copied);
    out += "::uoe::cuda_emu::launch_kernel([=](auto&&... a) { " + s.substr(start, open - start) + "(a...); }, " +
           s.substr(open + 3, close - open - 3) + ")";
    copied = close + 3;
  }
  return out + s.substr(copied);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: uoe_emu_rewrite_launches <input> <output>\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << "uoe_emu_rewrite_launches: cannot read " << argv[1] << "\n";
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    const std::string result = "#line 1 \"" + std::string(argv[1]) + "\"\n" + rewrite(text.str(), argv[1]);
    std::ofstream out(argv[2], std::ios::binary | std::ios::trunc);
    out << result;
    if (!out.flush()) {
      std::cerr << "uoe_emu_rewrite_launches: cannot write " << argv[2] << "\n";
      return 1;
    }
  } catch (const std::exception& e) {
    std::cerr << "uoe_emu_rewrite_launches: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
