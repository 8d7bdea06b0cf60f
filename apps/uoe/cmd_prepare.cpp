// uoe prepare: tokenise a text file into the memory-mapped token format (and save the tokenizer).
#include <cstdio>

#include "commands.h"
#include "core/error.h"

namespace uoe::cli {

int cmd_prepare(const Args& a) {
  const std::string data = a.required("data"), out = a.required("out"), spec = a.str("tokenizer");
  UOE_CHECK(!is_token_file(data), "--data ", data, " is already a token file (uoe train and eval take it as is)");
  if (spec.rfind("bpe:", 0) == 0) {
    bpe_vocab_size(spec);  // a malformed spec is reported as such, before the missing --tokenizer-out
    UOE_CHECK(a.has("tokenizer-out"), "--tokenizer ", spec, " learns a new tokenizer: --tokenizer-out <file.json> "
              "must keep it, or the token file cannot be read back into text");
  }
  const auto tok = make_tokenizer(spec, data);
  // Saved before the tokens: a token file whose tokenizer could not be saved cannot be read back into text
  if (a.has("tokenizer-out")) nn::save_tokenizer(*tok, a.str("tokenizer-out"));
  const int64_t n = nn::prepare_tokens(data, *tok, out);
  std::printf("%ld tokens (vocab %ld) -> %s\n", long(n), long(tok->vocab_size()), out.c_str());
  return 0;
}

}  // namespace uoe::cli
