// uoe prepare: tokenise a text file into the memory-mapped token format (and save the tokenizer).
#include <cstdio>

#include "args.h"
#include "commands.h"

namespace uoe::cli {

int cmd_prepare(const std::vector<std::string>& argv) {
  const Args a(argv, {"data", "out", "tokenizer", "tokenizer-out"});
  const std::string data = a.required("data"), out = a.required("out");
  const auto tok = make_tokenizer(a.str("tokenizer", "byte"), data);
  const int64_t n = nn::prepare_tokens(data, *tok, out);
  if (a.has("tokenizer-out")) nn::save_tokenizer(*tok, a.str("tokenizer-out", ""));
  std::printf("%ld tokens (vocab %ld) -> %s\n", long(n), long(tok->vocab_size()), out.c_str());
  return 0;
}

}  // namespace uoe::cli
