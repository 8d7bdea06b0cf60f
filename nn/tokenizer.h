// Tokenizers: the Tokenizer interface, a byte tokenizer, byte-level BPE (training, encode, decode) and JSON I/O.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/json.h"

namespace uoe::nn {

// Maps text (any bytes, valid UTF-8 or not) to ids in [0, vocab_size()) and back:
// decode(encode(s)) == s for every byte string s.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  virtual int64_t vocab_size() const = 0;
  virtual std::vector<int32_t> encode(std::string_view text) const = 0;
  // Ids outside [0, vocab_size()) raise uoe::Error naming the id and its position.
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // {"type": "byte"} or {"type": "bpe", "version": 1, "vocab_size": N, "merges": [[a, b], ...]}.
  virtual json::Value to_json() const = 0;
};

// 256 ids: id i is the byte i.
std::unique_ptr<Tokenizer> make_byte_tokenizer();

// Pre-tokenisation used by BPE training and encoding (merges never cross a chunk boundary).
// Splits `text` into consecutive chunks that concatenate back to `text`. Bytes are classed as
// letters (A-Z, a-z and every byte >= 0x80, so UTF-8 multi-byte characters join words), digits
// (0-9), whitespace (space \t \n \v \f \r) and other. A chunk is one of, tried in this order:
//   - a run of letters, with the single space before it when there is one (" the");
//   - a run of digits;
//   - a run of other bytes ("--", ",'");
//   - a run of whitespace; when letters follow it and it ends with a space, that last space
//     is left to the word ("\n  the" -> "\n ", " the"), as GPT-2's `\s+(?!\S)` does.
std::vector<std::string_view> pretokenize(std::string_view text);

// Byte-level BPE: ids 0..255 are bytes; merge i (0-based) makes id 256 + i from the pair
// merges[i] = (a, b) of earlier ids. Encoding splits with pretokenize() and, within each
// chunk, applies the merges in rank order (lowest i first; all left-to-right non-overlapping
// occurrences of one merge before the next), which reproduces what training did.
class BpeTokenizer final : public Tokenizer {
 public:
  explicit BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges);  // validated
  int64_t vocab_size() const override { return 256 + int64_t(merges_.size()); }
  std::vector<int32_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int32_t>& ids) const override;
  json::Value to_json() const override;

  const std::vector<std::pair<int32_t, int32_t>>& merges() const { return merges_; }
  const std::string& token_bytes(int32_t id) const;  // the bytes id stands for
  // Encodes one pre-tokenised chunk (no further splitting).
  void encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const;

 private:
  std::vector<std::pair<int32_t, int32_t>> merges_;
  std::vector<std::string> bytes_;  // [vocab_size]: the bytes of every id
  struct RankTable;                 // pair -> rank lookup
  std::shared_ptr<const RankTable> ranks_;
};

// Trains byte-level BPE on `text` up to `vocab_size` (>= 256) ids: starting from bytes, it
// repeatedly merges the most frequent adjacent pair within pre-tokenised chunks (overlapping
// occurrences all count, as in GPT-2 / minbpe); ties go to the smallest (a, b) pair, so the
// result is deterministic. Stops early, with fewer ids, when no adjacent pair is left.
// Cost: counts are kept per unique chunk and updated incrementally, only for the chunks that
// contain the merged pair.
std::unique_ptr<BpeTokenizer> train_bpe(std::string_view text, int64_t vocab_size);

// Builds a tokenizer from to_json()'s output; bad or missing fields raise uoe::Error naming them.
std::unique_ptr<Tokenizer> tokenizer_from_json(const json::Value& v);
// Writes to_json() to `path` atomically (temporary file + rename).
void save_tokenizer(const Tokenizer& t, const std::string& path);
// Reads a file written by save_tokenizer; errors name the file.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace uoe::nn
