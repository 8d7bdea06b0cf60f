// Mutations: byte edits anywhere, and JSON edits on a light tokenisation that tolerates already-broken text.
#include "mutator.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <iterator>

namespace uoe::fuzz {
namespace {

constexpr size_t kMaxInputBytes = 1 << 16;  // duplication stops growing an input here

// Numbers that sit on the edges readers must check: signs, int32/int64/uint64 limits, doubles out of range,
// and text that other JSON dialects read as a number.
constexpr const char* kAbsurdNumbers[] = {
    "0", "-0", "1", "2", "3", "7", "8", "-1", "255", "256", "65535", "65536", "2147483647", "2147483648",
    "4294967295", "4294967296", "-2147483649", "9223372036854775807", "9223372036854775808", "-9223372036854775808",
    "-9223372036854775809", "18446744073709551615", "18446744073709551616", "1e308", "-1e308", "1e309", "1e-400",
    "0.5", "1.0", "-0.0", "1e2", "1E+2", "2.5e-324", "100000000000000000000000000000", "NaN", "-Infinity",
    "Infinity", "nan", "0x10", "1e99999999999"};

// Field names and values of every fuzzed format, and strings a reader must refuse.
constexpr const char* kStrings[] = {
    "dtype", "shape", "data_offsets", "__metadata__", "format", "pt", "F32", "F64", "BF16", "F16", "I32", "I64",
    "BOOL", "U8", "F8_E4M3", "step", "exp_avg", "type", "byte", "bpe", "version", "vocab_size", "merges", "name",
    "d_model", "n_layers", "n_heads", "n_kv_heads", "context", "rope_base", "norm_eps", "tied_embeddings", "ffn",
    "kind", "dense", "moe", "aoe", "uoe", "hidden", "n_experts", "top_k", "expert_width", "shared_width",
    "routing_neurons", "d_low", "score", "weights", "combine", "routing", "top_p", "aux_loss", "z_loss", "swiglu",
    "gate", "full_softmax", "full_expert", "topp", "tokens_seen", "seed", "data_cursor", "rng", "offset", "lr",
    "", "\\ud800", "\\udc00\\ud800", "\\u0000", "\xff", "\xc3\xa9", "a\\\"b"};

// Values of every type, empty and nested containers; other_value(i) for i past them nests just under and just over
// the parser's limit of 512 levels.
constexpr const char* kValues[] = {"null", "true", "false", "[]", "{}", "[[]]", "{\"\":0}", "[1,2]", "\"\"", "0",
                                   "[0,0]", "[-1,1]", "{\"a\":{}}"};
constexpr size_t kOtherValues = std::size(kValues) + 2;
std::string other_value(size_t pick) {
  if (pick < std::size(kValues)) return kValues[pick];
  const size_t depth = pick == std::size(kValues) ? 511 : 513;
  return std::string(depth, '[') + std::string(depth, ']');
}

// 4- and 8-byte little-endian values for binary header fields.
std::string le_bytes(uint64_t v, int bytes) {
  std::string s;
  for (int i = 0; i < bytes; ++i) s += char(uint8_t(v >> (8 * i)));
  return s;
}

// A span [begin, end) of the text, with the bracket that encloses it ('{', '[' or 0 at top level).
struct Span {
  size_t begin, end;
  char parent;
};

// Strings, numbers, literals and containers of (possibly broken) JSON text, found by a scan that never fails.
struct JsonTokens {
  std::vector<Span> strings, numbers, values;
  explicit JsonTokens(const std::string& s) {
    std::vector<std::pair<size_t, char>> open;  // '{' or '[' and its position
    const auto parent = [&] { return open.empty() ? char(0) : open.back().second; };
    for (size_t i = 0; i < s.size();) {
      const char c = s[i];
      if (c == '"') {
        size_t j = i + 1;
        while (j < s.size() && s[j] != '"') j += s[j] == '\\' ? 2 : 1;
        j = std::min(j + 1, s.size());
        strings.push_back({i, j, parent()});
        values.push_back(strings.back());
        i = j;
      } else if (c == '-' || (c >= '0' && c <= '9')) {
        size_t j = i + 1;
        while (j < s.size() && std::string_view("0123456789.eE+-").find(s[j]) != std::string_view::npos) ++j;
        numbers.push_back({i, j, parent()});
        values.push_back(numbers.back());
        i = j;
      } else if (c >= 'a' && c <= 'z') {
        size_t j = i;
        while (j < s.size() && s[j] >= 'a' && s[j] <= 'z') ++j;
        values.push_back({i, j, parent()});
        i = j;
      } else if (c == '{' || c == '[') {
        open.emplace_back(i, c);
        ++i;
      } else if ((c == '}' || c == ']') && !open.empty()) {
        const size_t begin = open.back().first;
        open.pop_back();
        values.push_back({begin, i + 1, parent()});
        ++i;
      } else {
        ++i;
      }
    }
  }
};

size_t skip_ws(const std::string& s, size_t i) {
  while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\t' || s[i] == '\r')) ++i;
  return i;
}

// The value that starts at `at`, if one does.
const Span* value_at(const JsonTokens& t, size_t at) {
  for (const Span& v : t.values)
    if (v.begin == at) return &v;
  return nullptr;
}

// A safetensors file whose 8-byte length prefix frames a JSON header: its header and data.
bool split_safetensors(const std::string& s, std::string& header, std::string& data) {
  if (s.size() < 9) return false;
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(s[size_t(i)]);
  if (n > s.size() - 8 || s[8] != '{') return false;
  header = s.substr(8, size_t(n));
  data = s.substr(8 + size_t(n));
  return true;
}

bool looks_like_json(const std::string& s) {
  const size_t i = skip_ws(s, 0);
  return i < s.size() && (s[i] == '{' || s[i] == '[');
}

}  // namespace

uint64_t Mutator::next() {  // SplitMix64
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

size_t Mutator::below(size_t n) { return size_t(next() % n); }

std::string Mutator::mutate(const std::vector<std::string>& corpus) {
  std::string s = corpus[below(corpus.size())];
  for (size_t edits = 1 + below(4); edits > 0; --edits) s = edit(std::move(s), corpus);
  if (s.size() > kMaxInputBytes) s.resize(kMaxInputBytes);
  return s;
}

std::string Mutator::edit(std::string s, const std::vector<std::string>& corpus) {
  if (below(2) == 0) {
    std::string header, data;
    if (split_safetensors(s, header, data)) {
      header = edit_json(std::move(header));
      return le_bytes(header.size(), 8) + header + data;
    }
    if (looks_like_json(s)) return edit_json(std::move(s));
  }
  return edit_bytes(std::move(s), corpus);
}

std::string Mutator::edit_bytes(std::string s, const std::vector<std::string>& corpus) {
  if (s.empty()) return corpus[below(corpus.size())].substr(0, 1 + below(16));
  switch (below(8)) {
    case 0:  // flip one to eight bits
      for (size_t k = 1 + below(8); k > 0; --k) s[below(s.size())] ^= char(1u << below(8));
      return s;
    case 1: {  // an interesting byte
      static const uint8_t kBytes[] = {0x00, 0xff, 0x7f, 0x80, '"', '\\', '{', '[', ',', '-', '0', 'e'};
      s[below(s.size())] = char(kBytes[below(std::size(kBytes))]);
      return s;
    }
    case 2:  // truncation
      s.resize(below(s.size()));
      return s;
    case 3: {  // duplicate a span
      const size_t at = below(s.size()), n = 1 + below(std::min<size_t>(s.size() - at, 64));
      s.insert(below(s.size() + 1), s.substr(at, n));
      return s;
    }
    case 4: {  // delete a span
      const size_t at = below(s.size());
      s.erase(at, 1 + below(std::min<size_t>(s.size() - at, 64)));
      return s;
    }
    case 5: {  // splice: this file's head, another's tail
      const std::string& other = corpus[below(corpus.size())];
      return s.substr(0, below(s.size() + 1)) + other.substr(below(other.size() + 1));
    }
    default: {  // a little-endian field set to an absurd value: the token file's header fields, the safetensors
                // length prefix, or any position
      static const size_t kFields[][2] = {{0, 8}, {8, 4}, {12, 4}, {16, 8}, {24, 8}};
      size_t at = 0, width = below(2) ? 4 : 8;
      if (below(2)) {
        at = kFields[below(std::size(kFields))][0];
        width = at == 8 || at == 12 ? 4 : 8;
      } else {
        at = below(s.size());
      }
      const uint64_t n = s.size();
      const uint64_t kValues[] = {0, 1, 2, 3, 4, 8, 0x7f, 0x80, 0xffff, 0x10000, 0x7fffffff, 0x80000000,
                                  0xffffffff, 1ull << 32, (1ull << 63) - 1, 1ull << 63, ~0ull, n, n - 8, n + 1,
                                  n > 32 ? (n - 32) / 2 : 0, n > 32 ? (n - 32) / 2 + 1 : 1, n > 32 ? (n - 32) / 4 : 0};
      const std::string field = le_bytes(kValues[below(std::size(kValues))], int(width));
      if (at + width > s.size()) s.resize(at + width, '\0');
      s.replace(at, width, field);
      return s;
    }
  }
}

std::string Mutator::edit_json(std::string s) {
  const JsonTokens t(s);
  const auto replace = [&](const Span& sp, const std::string& with) {
    s.replace(sp.begin, sp.end - sp.begin, with);
    return s;
  };
  switch (below(6)) {
    case 0:
    case 1: {  // a number: absurd, or off by one (offsets that overlap or leave a gap)
      if (t.numbers.empty()) break;
      const Span& sp = t.numbers[below(t.numbers.size())];
      if (below(3) == 0) {
        int64_t v = 0;
        const auto r = std::from_chars(s.data() + sp.begin, s.data() + sp.end, v);
        if (r.ec == std::errc() && v > INT64_MIN && v < INT64_MAX)
          return replace(sp, std::to_string(below(2) ? v + 1 : v - 1));
      }
      return replace(sp, kAbsurdNumbers[below(std::size(kAbsurdNumbers))]);
    }
    case 2: {  // a string: another of this file (a duplicate key, a swapped field) or a known name
      if (t.strings.empty()) break;
      const Span& sp = t.strings[below(t.strings.size())];
      if (below(2)) {
        const Span& other = t.strings[below(t.strings.size())];
        return replace(sp, s.substr(other.begin, other.end - other.begin));
      }
      return replace(sp, std::string("\"") + kStrings[below(std::size(kStrings))] + "\"");
    }
    case 3: {  // a value of another type
      if (t.values.empty()) break;
      return replace(t.values[below(t.values.size())], other_value(below(kOtherValues)));
    }
    case 4:
    case 5: {  // duplicate or remove an object member ("key": value) or an array element
      if (t.values.empty()) break;
      const Span& v = t.values[below(t.values.size())];
      Span whole = v;
      if (v.parent == '{') {  // a key: extend over its value
        const size_t colon = skip_ws(s, v.end);
        if (colon >= s.size() || s[colon] != ':') break;
        const Span* value = value_at(t, skip_ws(s, colon + 1));
        if (!value) break;
        whole.end = value->end;
      } else if (v.parent != '[') {
        break;
      }
      const std::string item = s.substr(whole.begin, whole.end - whole.begin);
      if (below(2)) {
        s.insert(whole.end, "," + item);
        return s;
      }
      const size_t comma = skip_ws(s, whole.end);
      s.erase(whole.begin, (comma < s.size() && s[comma] == ',' ? comma + 1 : whole.end) - whole.begin);
      return s;
    }
  }
  return s;
}

}  // namespace uoe::fuzz
