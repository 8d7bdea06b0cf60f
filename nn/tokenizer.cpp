// Tokenizers: the byte tokenizer, GPT-2-like pre-tokenisation, and JSON save/load of tokenizers.
#include "nn/tokenizer.h"

#include <string>

#include "core/atomic_file.h"
#include "core/error.h"

namespace uoe::nn {

namespace {

class ByteTokenizer final : public Tokenizer {
 public:
  int64_t vocab_size() const override { return 256; }
  std::vector<int32_t> encode(std::string_view text) const override {
    std::vector<int32_t> ids(text.size());
    for (size_t i = 0; i < text.size(); ++i) ids[i] = int32_t(uint8_t(text[i]));
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override {
    std::string out(ids.size(), '\0');
    for (size_t i = 0; i < ids.size(); ++i) {
      UOE_CHECK(ids[i] >= 0 && ids[i] < 256, "[ByteTokenizer::decode] id ", ids[i], " at position ", i,
                " is out of range [0, 256)");
      out[i] = char(uint8_t(ids[i]));
    }
    return out;
  }
  json::Value to_json() const override {
    json::Value v = json::Value::object();
    v["type"] = "byte";
    return v;
  }
};

enum class ByteClass { Letter, Digit, Space, Other };

inline ByteClass classify(char ch) {
  const auto c = uint8_t(ch);
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80) return ByteClass::Letter;
  if (c >= '0' && c <= '9') return ByteClass::Digit;
  if (c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r') return ByteClass::Space;
  return ByteClass::Other;
}

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

std::vector<std::string_view> pretokenize(std::string_view text) {
  std::vector<std::string_view> chunks;
  const size_t n = text.size();
  size_t i = 0;
  auto run_end = [&](size_t j, ByteClass cls) {
    while (j < n && classify(text[j]) == cls) ++j;
    return j;
  };
  while (i < n) {
    const ByteClass cls = classify(text[i]);
    size_t j;
    if (text[i] == ' ' && i + 1 < n && classify(text[i + 1]) == ByteClass::Letter) {
      j = run_end(i + 1, ByteClass::Letter);  // " word"
    } else if (cls == ByteClass::Space) {
      j = run_end(i, ByteClass::Space);
      // Leave a final space to the word that follows (the branch above takes it next).
      if (j < n && j - i >= 2 && text[j - 1] == ' ' && classify(text[j]) == ByteClass::Letter) --j;
    } else {
      j = run_end(i, cls);
    }
    chunks.push_back(text.substr(i, j - i));
    i = j;
  }
  return chunks;
}

// ---------------------------------------------------------------------------------------------
// JSON
// ---------------------------------------------------------------------------------------------

std::unique_ptr<Tokenizer> tokenizer_from_json(const json::Value& v) {
  UOE_CHECK(v.is_object(), "[tokenizer] JSON must be an object, got ", json::type_name(v.type()));
  UOE_CHECK(v.contains("type"), "[tokenizer] JSON field \"type\" is missing (expected \"byte\" or \"bpe\")");
  const json::Value& type = v.at("type");
  UOE_CHECK(type.is_string(), "[tokenizer] JSON field \"type\" must be a string, got ", json::type_name(type.type()));
  const std::string& t = type.as_string();
  if (t == "byte") return make_byte_tokenizer();
  UOE_CHECK(t == "bpe", "[tokenizer] JSON field \"type\" is \"", t, "\": expected \"byte\" or \"bpe\"");

  if (v.contains("version")) {
    const json::Value& ver = v.at("version");
    UOE_CHECK(ver.is_integer() && ver.as_int() == 1, "[tokenizer] JSON field \"version\" must be 1, got ",
              ver.dump());
  }
  UOE_CHECK(v.contains("merges"), "[tokenizer] JSON field \"merges\" is missing (a bpe tokenizer needs it)");
  const json::Value& merges = v.at("merges");
  UOE_CHECK(merges.is_array(), "[tokenizer] JSON field \"merges\" must be an array, got ",
            json::type_name(merges.type()));
  const auto& list = merges.as_array();
  std::vector<std::pair<int32_t, int32_t>> pairs;
  pairs.reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    const json::Value& p = list[i];
    UOE_CHECK(p.is_array() && p.size() == 2, "[tokenizer] JSON field \"merges\"[", i,
              "] must be an array of two ids, got ", p.dump());
    int32_t ids[2];
    for (size_t k = 0; k < 2; ++k) {
      const json::Value& e = p.as_array()[k];
      const int64_t limit = 256 + int64_t(i);
      UOE_CHECK(e.is_integer(), "[tokenizer] JSON field \"merges\"[", i, "][", k, "] must be an integer id, got ",
                e.dump());
      const int64_t id = e.as_int();
      UOE_CHECK(id >= 0 && id < limit, "[tokenizer] JSON field \"merges\"[", i, "][", k, "] is ", id,
                ": merge ", i, " may only use ids in [0, ", limit, ")");
      ids[k] = int32_t(id);
    }
    pairs.emplace_back(ids[0], ids[1]);
  }
  if (v.contains("vocab_size")) {
    const json::Value& vs = v.at("vocab_size");
    const int64_t expect = 256 + int64_t(pairs.size());
    UOE_CHECK(vs.is_integer() && vs.as_int() == expect, "[tokenizer] JSON field \"vocab_size\" is ", vs.dump(),
              " but \"merges\" has ", pairs.size(), " entries, i.e. vocab_size ", expect);
  }
  try {
    return std::make_unique<BpeTokenizer>(std::move(pairs));
  } catch (const Error& e) {
    fail("[tokenizer] JSON field \"merges\": ", e.what());  // e.g. a repeated merge
  }
}

void save_tokenizer(const Tokenizer& t, const std::string& path) {
  write_file_atomic(path, t.to_json().dump(-1) + "\n");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  const json::Value v = json::read_file(path);
  try {
    return tokenizer_from_json(v);
  } catch (const Error& e) {
    fail(path, ": ", e.what());
  }
}

}  // namespace uoe::nn
