// Token datasets: writing token files, the mmap TokenFile reader, and deterministic train/val batches.
#include "nn/dataset.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cmath>
#include <cstring>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/rng.h"

namespace uoe::nn {

namespace {

void put_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char(uint8_t(v >> (8 * i))));
}

uint64_t get_le(const uint8_t* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t(p[i]) << (8 * i);
  return v;
}

int bytes_per_id_for(int64_t vocab_size) { return vocab_size <= 65536 ? 2 : 4; }

}  // namespace

void write_token_file(const std::string& path, const std::vector<int32_t>& ids, int64_t vocab_size) {
  UOE_CHECK(vocab_size >= 1 && vocab_size <= (int64_t(1) << 32), "[write_token_file] ", path,
            ": vocab_size must be in [1, 2^32], got ", vocab_size);
  const int bpi = bytes_per_id_for(vocab_size);
  std::string bytes;
  bytes.reserve(size_t(kTokenFileHeaderBytes) + ids.size() * size_t(bpi));
  bytes.append(kTokenFileMagic, sizeof(kTokenFileMagic));
  put_le(bytes, kTokenFileVersion, 4);
  put_le(bytes, uint64_t(bpi), 4);
  put_le(bytes, uint64_t(ids.size()), 8);
  put_le(bytes, uint64_t(vocab_size), 8);
  for (size_t i = 0; i < ids.size(); ++i) {
    UOE_CHECK(ids[i] >= 0 && ids[i] < vocab_size, "[write_token_file] ", path, ": id ", ids[i], " at position ", i,
              " is out of range [0, ", vocab_size, ")");
    put_le(bytes, uint64_t(ids[i]), bpi);
  }
  write_file_atomic(path, bytes);
}

int64_t prepare_tokens(const std::string& text_path, const Tokenizer& tok, const std::string& out_path) {
  const std::string text = read_file_bytes(text_path);
  const std::vector<int32_t> ids = tok.encode(text);
  write_token_file(out_path, ids, tok.vocab_size());
  return int64_t(ids.size());
}

// ---------------------------------------------------------------------------------------------
// TokenFile
// ---------------------------------------------------------------------------------------------

TokenFile::TokenFile(const std::string& path, const std::string& text) : path_(path), text_(text) {
  const int fd = open_regular_file(path);  // a FIFO or a device (/dev/zero) is refused at once
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("[TokenFile] cannot stat '", path, "': ", std::strerror(err));
  }
  const auto file_bytes = uint64_t(st.st_size);
  if (file_bytes < uint64_t(kTokenFileHeaderBytes)) {
    ::close(fd);
    fail("[TokenFile] '", path, "' is truncated: it has ", file_bytes, " bytes but the header alone needs ",
         kTokenFileHeaderBytes);
  }
  void* map = ::mmap(nullptr, size_t(file_bytes), PROT_READ, MAP_PRIVATE, fd, 0);
  const int map_err = errno;
  ::close(fd);  // the mapping stays valid
  UOE_CHECK(map != MAP_FAILED, "[TokenFile] cannot mmap '", path, "': ", std::strerror(map_err));
  data_ = static_cast<const uint8_t*>(map);
  map_bytes_ = size_t(file_bytes);

  try {
    if (std::memcmp(data_, kTokenFileMagic, sizeof(kTokenFileMagic)) != 0)
      fail("[TokenFile] '", path, "' is not a uoe token file: bad magic (expected \"UOETOK1\\0\")");
    const uint64_t version = get_le(data_ + 8, 4);
    if (version != kTokenFileVersion)
      fail("[TokenFile] '", path, "' has version ", version, "; this build reads version ", kTokenFileVersion);
    const uint64_t bpi = get_le(data_ + 12, 4);
    if (bpi != 2 && bpi != 4) fail("[TokenFile] '", path, "' has ", bpi, " bytes per id; expected 2 or 4");
    const uint64_t count = get_le(data_ + 16, 8);
    const uint64_t vocab = get_le(data_ + 24, 8);
    if (vocab < 1) fail("[TokenFile] '", path, "' has vocab_size 0; expected at least 1");
    if (vocab > (uint64_t(1) << (8 * bpi)))
      fail("[TokenFile] '", path, "' has vocab_size ", vocab, ", which ", bpi, "-byte ids cannot hold");
    const uint64_t data_bytes = file_bytes - uint64_t(kTokenFileHeaderBytes);
    if (count > data_bytes / bpi)
      fail("[TokenFile] '", path, "' is truncated: the header says ", count, " ids (", count, " x ", bpi,
           " bytes) but only ", data_bytes, " bytes of data follow it");
    if (count * bpi != data_bytes)
      fail("[TokenFile] '", path, "' has ", data_bytes - count * bpi, " unexpected bytes after its ", count, " ids");
    count_ = int64_t(count);
    vocab_size_ = int64_t(vocab);
    bytes_per_id_ = int(bpi);
  } catch (...) {
    ::munmap(const_cast<uint8_t*>(data_), map_bytes_);
    data_ = nullptr;
    throw;
  }
}

std::string TokenFile::name() const {
  return "'" + path_ + "'" + (text_.empty() ? std::string() : " (the tokens of '" + text_ + "')");
}

TokenFile::~TokenFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), map_bytes_);
}

int64_t TokenFile::raw(int64_t i) const {
  const uint8_t* p = data_ + kTokenFileHeaderBytes + i * bytes_per_id_;
  return int64_t(get_le(p, bytes_per_id_));
}

int64_t TokenFile::operator[](int64_t i) const {
  UOE_CHECK(i >= 0 && i < count_, "[TokenFile] index ", i, " is out of range [0, ", count_, ") in ", name());
  return raw(i);
}

void TokenFile::read(int64_t start, int64_t n, int64_t* out) const {
  UOE_CHECK(start >= 0 && n >= 0 && start <= count_ - n, "[TokenFile] range [", start, ", ", start + n,
            ") is out of range [0, ", count_, ") in ", name());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t id = raw(start + i);
    UOE_CHECK(id < vocab_size_, "[TokenFile] ", name(), ": id ", id, " at position ", start + i,
              " is not below the vocab_size ", vocab_size_);
    out[i] = id;
  }
}

// ---------------------------------------------------------------------------------------------
// TokenDataset
// ---------------------------------------------------------------------------------------------

TokenDataset::TokenDataset(std::shared_ptr<TokenFile> file, double val_fraction) : file_(std::move(file)) {
  UOE_CHECK(file_ != nullptr, "[TokenDataset] the token file is null");
  UOE_CHECK(std::isfinite(val_fraction) && val_fraction >= 0.0 && val_fraction < 1.0,
            "[TokenDataset] val_fraction must be in [0, 1), got ", val_fraction);
  const int64_t n = file_->size();
  val_tokens_ = std::min<int64_t>(n, int64_t(std::floor(double(n) * val_fraction)));
  train_tokens_ = n - val_tokens_;
}

uint64_t TokenDataset::batch_stream_seed(uint64_t seed, uint64_t step) {
  const std::array<uint32_t, 4> ctr = {uint32_t(step), uint32_t(step >> 32), 0x64617461u, 0u};
  const std::array<uint32_t, 2> key = {uint32_t(seed), uint32_t(seed >> 32)};
  const auto w = Philox::block(ctr, key);
  return uint64_t(w[0]) | (uint64_t(w[1]) << 32);
}

Batch TokenDataset::make_batch(const std::vector<int64_t>& starts, int64_t T) const {
  const auto B = int64_t(starts.size());
  const auto opt = TensorOptions{}.with_dtype(DType::Int64);
  Batch batch{empty({B, T}, opt), empty({B, T}, opt)};
  int64_t* x = batch.x.data_ptr<int64_t>();
  int64_t* y = batch.y.data_ptr<int64_t>();
  std::vector<int64_t> window(static_cast<size_t>(T + 1));
  for (int64_t b = 0; b < B; ++b) {
    file_->read(starts[size_t(b)], T + 1, window.data());
    std::copy(window.begin(), window.end() - 1, x + b * T);
    std::copy(window.begin() + 1, window.end(), y + b * T);
  }
  return batch;
}

void TokenDataset::check_split(const char* split, int64_t tokens, int64_t T) const {
  UOE_CHECK(tokens >= T + 1, "[TokenDataset] the ", split, " split of ", file_->name(), " has ", tokens,
            " tokens but one window of T=", T, " needs ", T + 1, " (a longer text, or shorter windows)");
}

void TokenDataset::check_windows(int64_t T) const {
  check_split("training", train_tokens_, T);
  check_split("validation", val_tokens_, T);
}

Batch TokenDataset::train_batch(uint64_t seed, uint64_t step, int64_t B, int64_t T, int64_t first_row,
                                int64_t rows) const {
  UOE_CHECK(B >= 1 && T >= 1, "[TokenDataset::train_batch] B and T must be >= 1, got B=", B, " T=", T);
  if (rows < 0) rows = B - first_row;
  UOE_CHECK(first_row >= 0 && first_row + rows <= B, "[TokenDataset::train_batch] rows [", first_row, ", ",
            first_row + rows, ") are not rows of a batch of ", B);
  check_split("training", train_tokens_, T);
  std::vector<int64_t> starts(static_cast<size_t>(B));
  fill_randint(starts.data(), B, batch_stream_seed(seed, step), 0, 0, train_tokens_ - T);  // [0, train - T - 1]
  return make_batch(std::vector<int64_t>(starts.begin() + first_row, starts.begin() + first_row + rows), T);
}

int64_t TokenDataset::val_batch_count(int64_t B, int64_t T, int64_t max_batches) const {
  UOE_CHECK(B >= 1 && T >= 1, "[TokenDataset::val_batch_count] B and T must be >= 1, got B=", B, " T=", T);
  check_split("validation", val_tokens_, T);
  const int64_t windows = (val_tokens_ - 1) / T, n_batches = (windows + B - 1) / B;
  return max_batches >= 0 ? std::min(n_batches, max_batches) : n_batches;
}

Batch TokenDataset::val_batch(int64_t k, int64_t B, int64_t T) const {
  const int64_t n_batches = val_batch_count(B, T), windows = (val_tokens_ - 1) / T;
  UOE_CHECK(k >= 0 && k < n_batches, "[TokenDataset::val_batch] batch index ", k, " is out of range [0, ", n_batches,
            ")");
  const int64_t first = k * B, rows = std::min(B, windows - first);
  std::vector<int64_t> starts(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) starts[size_t(r)] = val_begin() + (first + r) * T;
  return make_batch(starts, T);
}

}  // namespace uoe::nn
