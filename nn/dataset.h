// Token datasets: prepare_tokens (text -> binary id file), TokenFile (mmap reader), TokenDataset (train/val batches).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "nn/tokenizer.h"

namespace uoe::nn {

// Binary token file layout (all integers little-endian):
//   bytes  0..7   magic "UOETOK1\0"
//   bytes  8..11  uint32 version (1)
//   bytes 12..15  uint32 bytes per id: 2 when vocab_size <= 65536, else 4
//   bytes 16..23  uint64 count of ids
//   bytes 24..31  uint64 vocab_size
//   bytes 32..    count ids, each `bytes per id` bytes (unsigned)
inline constexpr char kTokenFileMagic[8] = {'U', 'O', 'E', 'T', 'O', 'K', '1', '\0'};
inline constexpr uint32_t kTokenFileVersion = 1;
inline constexpr int64_t kTokenFileHeaderBytes = 32;

// Writes `ids` (each in [0, vocab_size)) as a token file, atomically.
void write_token_file(const std::string& path, const std::vector<int32_t>& ids, int64_t vocab_size);
// Tokenises the text file `text_path` with `tok` and writes the ids to `out_path` (atomically).
// Returns the number of tokens.
int64_t prepare_tokens(const std::string& text_path, const Tokenizer& tok, const std::string& out_path);

// A read-only memory-mapped token file. Opening validates the header and the file size, with
// errors naming the file (missing file, bad magic, unknown version, truncated data, ...).
class TokenFile {
 public:
  // `text` names the text file the ids were made from, if any (for error messages).
  explicit TokenFile(const std::string& path, const std::string& text = "");
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  int64_t size() const { return count_; }
  int64_t vocab_size() const { return vocab_size_; }
  int bytes_per_id() const { return bytes_per_id_; }
  const std::string& path() const { return path_; }
  // "'<path>'", or "'<path>' (the tokens of '<text>')", for error messages.
  std::string name() const;
  // Id i (bounds-checked).
  int64_t operator[](int64_t i) const;
  // Copies ids [start, start + n) into out (bounds-checked once); an id >= vocab_size raises an
  // error naming the file and the position.
  void read(int64_t start, int64_t n, int64_t* out) const;

 private:
  int64_t raw(int64_t i) const;
  std::string path_, text_;
  const uint8_t* data_ = nullptr;  // the whole mapping (header included)
  size_t map_bytes_ = 0;
  int64_t count_ = 0, vocab_size_ = 0;
  int bytes_per_id_ = 2;
};

// One batch: x = inputs, y = the next tokens; both int64 [B, T] on the CPU.
struct Batch {
  Tensor x, y;
};

// Splits a token file into a training part (the first tokens) and a validation part (the last
// floor(size * val_fraction) tokens), and cuts windows of T + 1 tokens from each.
class TokenDataset {
 public:
  explicit TokenDataset(std::shared_ptr<TokenFile> file, double val_fraction = 0.1);

  // B random windows of the training split. The starts are uniform on [0, train_tokens - T - 1]
  // and depend only on (seed, step): the Philox stream keyed by (seed, step) (see
  // batch_stream_seed) gives start b from its b-th randint draw. So batch b of a run resumed at
  // step s is the batch the uninterrupted run drew, and batches for B and B' > B share rows.
  // x[b] = tokens[start_b : start_b + T], y[b] = tokens[start_b + 1 : start_b + T + 1].
  // With first_row/rows: only rows [first_row, first_row + rows) of that batch are read (a data-parallel rank's
  // share); rows < 0: all B.
  Batch train_batch(uint64_t seed, uint64_t step, int64_t B, int64_t T, int64_t first_row = 0,
                    int64_t rows = -1) const;

  // Deterministic, non-overlapping windows covering the validation split from its start: window
  // i starts at val_begin + i * T (its y ends at val_begin + (i + 1) * T, so the windows' y cover
  // every validation token but the first). The windows are grouped B per batch in order; the
  // last batch may have fewer than B rows; at most max_batches batches (a negative value: all). Batches are
  // built one at a time, as read: val_batch(k, B, T) for k < val_batch_count(B, T, max_batches).
  int64_t val_batch_count(int64_t B, int64_t T, int64_t max_batches = -1) const;
  Batch val_batch(int64_t k, int64_t B, int64_t T) const;

  // Both splits hold at least one window of T + 1 tokens, else one error naming the file and the split.
  void check_windows(int64_t T) const;
  int64_t train_tokens() const { return train_tokens_; }
  int64_t val_tokens() const { return val_tokens_; }
  int64_t val_begin() const { return train_tokens_; }
  const TokenFile& file() const { return *file_; }

  // The Philox key of step `step`'s batch: words 0 and 1 of Philox4x32-10 with key (seed) and
  // counter (lo32(step), hi32(step), 0x64617461 "data", 0).
  static uint64_t batch_stream_seed(uint64_t seed, uint64_t step);

 private:
  Batch make_batch(const std::vector<int64_t>& starts, int64_t T) const;
  void check_split(const char* split, int64_t tokens, int64_t T) const;
  std::shared_ptr<TokenFile> file_;
  int64_t train_tokens_ = 0, val_tokens_ = 0;
};

}  // namespace uoe::nn
