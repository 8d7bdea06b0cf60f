// Tests for nn/dataset.h: token files (write, prepare, mmap read, header checks) and train/val batches.
#include "nn/dataset.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"

namespace {

namespace fs = std::filesystem;
using uoe::nn::TokenDataset;
using uoe::nn::TokenFile;

// A fresh temporary directory, removed with its contents at the end of the test.
struct TempDir {
  fs::path dir;
  TempDir() {
    static int counter = 0;
    dir = fs::temp_directory_path() /
          ("uoe_dataset_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string& name) const { return (dir / name).string(); }
};

using uoe::testing::error_of;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// ids[i] = i: a batch shows where its windows start.
std::shared_ptr<TokenFile> iota_file(const TempDir& tmp, int64_t n, const std::string& name = "iota.tok") {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[size_t(i)] = int32_t(i);
  uoe::nn::write_token_file(tmp / name, ids, std::max<int64_t>(n, 1));
  return std::make_shared<TokenFile>(tmp / name);
}

std::vector<int64_t> values(const uoe::Tensor& t) { return t.to_vector<int64_t>(); }

// ---- token files ----

TEST(DatasetTokenFile, PrepareRoundTrip) {
  TempDir tmp;
  std::string text;
  for (int i = 0; i < 300; ++i) text += "To be, or not to be: that is the question " + std::to_string(i) + ".\n";
  text += "\xff\xfe raw bytes \x80";
  write_bytes(tmp / "text.txt", text);

  auto byte = uoe::nn::make_byte_tokenizer();
  auto bpe = uoe::nn::train_bpe(text, 400);
  const std::vector<const uoe::nn::Tokenizer*> toks = {byte.get(), bpe.get()};
  for (const uoe::nn::Tokenizer* tok : toks) {
    const std::string out = tmp / "text.tok";
    const int64_t n = uoe::nn::prepare_tokens(tmp / "text.txt", *tok, out);
    const auto ids = tok->encode(text);
    ASSERT_EQ(n, int64_t(ids.size()));
    EXPECT_EQ(int64_t(fs::file_size(out)), 32 + 2 * n);
    TokenFile f(out);
    EXPECT_EQ(f.size(), n);
    EXPECT_EQ(f.vocab_size(), tok->vocab_size());
    EXPECT_EQ(f.bytes_per_id(), 2);
    std::vector<int32_t> back(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) back[size_t(i)] = int32_t(f[i]);
    EXPECT_EQ(back, ids);
    EXPECT_EQ(tok->decode(back), text);
    std::vector<int64_t> part(5);
    f.read(n - 5, 5, part.data());
    for (int i = 0; i < 5; ++i) EXPECT_EQ(part[size_t(i)], ids[size_t(n - 5 + i)]);
    EXPECT_NE(error_of([&] { f[n]; }).find(std::to_string(n)), std::string::npos);
    EXPECT_THROW(f.read(n - 4, 5, part.data()), uoe::Error);
  }
  // The header, byte for byte (little-endian).
  const std::string bytes = read_bytes(tmp / "text.tok");
  EXPECT_EQ(bytes.substr(0, 8), std::string("UOETOK1\0", 8));
  EXPECT_EQ(bytes.substr(8, 8), std::string("\1\0\0\0\2\0\0\0", 8));
  EXPECT_EQ(bytes.substr(24, 8), std::string("\x90\x01\0\0\0\0\0\0", 8));  // vocab 400
}

TEST(DatasetTokenFile, FourByteIdsAboveVocab65536) {
  TempDir tmp;
  const std::vector<int32_t> ids = {0, 65535, 65536, 69999, 7};
  uoe::nn::write_token_file(tmp / "big.tok", ids, 70000);
  TokenFile f(tmp / "big.tok");
  EXPECT_EQ(f.bytes_per_id(), 4);
  EXPECT_EQ(f.vocab_size(), 70000);
  ASSERT_EQ(f.size(), 5);
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ(f[int64_t(i)], ids[i]);
  EXPECT_EQ(fs::file_size(tmp / "big.tok"), 32u + 4u * 5u);
  // Exactly 65536 still fits in two bytes.
  uoe::nn::write_token_file(tmp / "edge.tok", {65535}, 65536);
  EXPECT_EQ(TokenFile(tmp / "edge.tok").bytes_per_id(), 2);
  // Ids outside the vocabulary are refused when writing.
  EXPECT_NE(error_of([&] { uoe::nn::write_token_file(tmp / "x.tok", {3, 10}, 10); }).find("10"),
            std::string::npos);
}

TEST(DatasetTokenFile, HeaderIsValidated) {
  TempDir tmp;
  iota_file(tmp, 100, "good.tok");
  const std::string good = read_bytes(tmp / "good.tok");
  auto open_error = [&](const std::string& name, const std::string& bytes) {
    write_bytes(tmp / name, bytes);
    return error_of([&] { TokenFile f(tmp / name); });
  };
  auto expect_has = [](const std::string& msg, const std::string& a, const std::string& b) {
    EXPECT_NE(msg.find(a), std::string::npos) << msg;
    EXPECT_NE(msg.find(b), std::string::npos) << msg;
  };

  const std::string missing = tmp / "missing.tok";
  expect_has(error_of([&] { TokenFile f(missing); }), missing, "No such file or directory");

  std::string bad_magic = good;
  bad_magic[3] = 'X';
  expect_has(open_error("magic.tok", bad_magic), tmp / "magic.tok", "bad magic");

  expect_has(open_error("short.tok", good.substr(0, good.size() - 1)), tmp / "short.tok", "truncated");
  expect_has(open_error("header.tok", good.substr(0, 20)), tmp / "header.tok", "truncated");
  expect_has(open_error("empty.tok", ""), tmp / "empty.tok", "truncated");
  expect_has(open_error("long.tok", good + "xy"), tmp / "long.tok", "unexpected");

  std::string bad_version = good;
  bad_version[8] = 2;
  expect_has(open_error("version.tok", bad_version), tmp / "version.tok", "version");
  std::string bad_width = good;
  bad_width[12] = 3;
  expect_has(open_error("width.tok", bad_width), tmp / "width.tok", "bytes per id");
  std::string no_vocab = good;
  no_vocab[24] = 0;  // vocab 100 -> 0: not a matter of the id width
  const std::string e = open_error("vocab0.tok", no_vocab);
  expect_has(e, tmp / "vocab0.tok", "has vocab_size 0; expected at least 1");
  EXPECT_EQ(e.find("cannot hold"), std::string::npos) << e;

  // An id at or above the vocab size is caught when read.
  std::string bad_id = good;
  bad_id[24] = 50;  // vocab 100 -> 50, while ids go up to 99
  write_bytes(tmp / "id.tok", bad_id);
  TokenFile f(tmp / "id.tok");
  std::vector<int64_t> buf(100);
  expect_has(error_of([&] { f.read(0, 100, buf.data()); }), "position 50", tmp / "id.tok");
}

// ---- batches ----

TEST(DatasetBatches, TrainBatchesDependOnlyOnSeedAndStep) {
  TempDir tmp;
  auto file = iota_file(tmp, 5000);
  TokenDataset ds(file, 0.1);
  EXPECT_EQ(ds.train_tokens(), 4500);
  EXPECT_EQ(ds.val_tokens(), 500);
  const int64_t B = 8, T = 16;

  const auto a = ds.train_batch(42, 7, B, T);
  EXPECT_EQ(a.x.shape(), (uoe::Shape{B, T}));
  EXPECT_EQ(a.y.shape(), (uoe::Shape{B, T}));
  EXPECT_EQ(a.x.dtype(), uoe::DType::Int64);
  const auto x = values(a.x), y = values(a.y);
  for (int64_t b = 0; b < B; ++b) {
    const int64_t start = x[size_t(b * T)];
    EXPECT_GE(start, 0);
    EXPECT_LE(start, ds.train_tokens() - T - 1);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(x[size_t(b * T + t)], start + t);  // consecutive tokens
      EXPECT_EQ(y[size_t(b * T + t)], start + t + 1);  // y is x shifted by one
    }
  }
  // A "resumed" run: a new dataset on a newly opened file, straight to step 7.
  TokenDataset resumed(std::make_shared<TokenFile>(tmp / "iota.tok"), 0.1);
  for (int s = 0; s < 7; ++s) ds.train_batch(42, uint64_t(s), B, T);
  EXPECT_EQ(values(resumed.train_batch(42, 7, B, T).x), x);
  EXPECT_EQ(values(ds.train_batch(42, 7, B, T).y), y);
  // Other steps and seeds differ.
  EXPECT_NE(values(ds.train_batch(42, 8, B, T).x), x);
  EXPECT_NE(values(ds.train_batch(43, 7, B, T).x), x);
  // A larger batch extends the smaller one.
  const auto big = values(ds.train_batch(42, 7, 2 * B, T).x);
  EXPECT_EQ(std::vector<int64_t>(big.begin(), big.begin() + B * T), x);
  // A data-parallel rank's share: rows [3, 6) of the same batch, read alone.
  const auto share = ds.train_batch(42, 7, B, T, 3, 3);
  EXPECT_EQ(share.x.shape(), (uoe::Shape{3, T}));
  EXPECT_EQ(values(share.x), std::vector<int64_t>(x.begin() + 3 * T, x.begin() + 6 * T));
  EXPECT_EQ(values(share.y), std::vector<int64_t>(y.begin() + 3 * T, y.begin() + 6 * T));
  EXPECT_THROW(ds.train_batch(42, 7, B, T, 6, 3), uoe::Error);
}

TEST(DatasetBatches, TrainStartsCoverTheWholeRange) {
  TempDir tmp;
  auto file = iota_file(tmp, 40);
  TokenDataset ds(file, 0.25);  // train = 30 tokens; T = 4 -> starts in [0, 25]
  std::set<int64_t> starts;
  for (uint64_t s = 0; s < 400; ++s) {
    const auto x = values(ds.train_batch(1, s, 4, 4).x);
    for (int b = 0; b < 4; ++b) starts.insert(x[size_t(b * 4)]);
  }
  EXPECT_EQ(*starts.begin(), 0);
  EXPECT_EQ(*starts.rbegin(), 25);
  EXPECT_EQ(starts.size(), 26u);
  // The exact-fit split: one possible window.
  const auto one = ds.train_batch(9, 9, 3, 29);
  EXPECT_EQ(values(one.x)[0], 0);
  EXPECT_EQ(values(one.y).back(), 29);
}

TEST(DatasetBatches, ValBatchesCoverTheSplitInOrder) {
  TempDir tmp;
  auto file = iota_file(tmp, 1000);
  TokenDataset ds(file, 0.1);  // validation = tokens [900, 1000)
  ASSERT_EQ(ds.val_begin(), 900);
  const int64_t B = 5, T = 8;
  // 99 / 8 = 12 full windows -> batches of 5, 5, 2.
  ASSERT_EQ(ds.val_batch_count(B, T, 100), 3);
  std::vector<uoe::nn::Batch> batches;
  for (int64_t k = 0; k < 3; ++k) batches.push_back(ds.val_batch(k, B, T));
  EXPECT_EQ(batches[2].x.size(0), 2);
  int64_t next = 900;
  for (const auto& b : batches) {
    const auto x = values(b.x), y = values(b.y);
    for (int64_t r = 0; r < b.x.size(0); ++r) {
      for (int64_t t = 0; t < T; ++t) {
        EXPECT_EQ(x[size_t(r * T + t)], next + t);
        EXPECT_EQ(y[size_t(r * T + t)], next + t + 1);
      }
      next += T;
    }
  }
  EXPECT_EQ(next, 900 + 12 * T);
  EXPECT_LE(next, 1000 - 1);  // the last y stays inside the file
  // Deterministic, and max_batches cuts the list.
  EXPECT_EQ(ds.val_batch_count(B, T, 2), 2);
  EXPECT_EQ(values(ds.val_batch(1, B, T).x), values(batches[1].x));
  EXPECT_EQ(ds.val_batch_count(B, T), 3);
  EXPECT_NE(error_of([&] { ds.val_batch(3, B, T); }).find("[TokenDataset::val_batch] batch index 3 is out of range [0, 3)"),
            std::string::npos);
}

TEST(DatasetBatches, TooShortDataErrors) {
  TempDir tmp;
  auto file = iota_file(tmp, 20);
  TokenDataset ds(file, 0.1);  // train 18, validation 2
  EXPECT_NO_THROW(ds.train_batch(0, 0, 2, 17));
  const std::string msg = error_of([&] { ds.train_batch(0, 0, 2, 18); });
  EXPECT_NE(msg.find("18 tokens"), std::string::npos) << msg;
  EXPECT_NE(msg.find("needs 19"), std::string::npos) << msg;
  const std::string vmsg = error_of([&] { ds.val_batch_count(1, 2, 1); });
  EXPECT_NE(vmsg.find("2 tokens"), std::string::npos) << vmsg;
  EXPECT_NE(vmsg.find("needs 3"), std::string::npos) << vmsg;
  EXPECT_EQ(ds.val_batch_count(4, 1), 1);  // T = 1 fits: one window
  TokenDataset no_val(file, 0.0);
  EXPECT_EQ(no_val.val_tokens(), 0);
  EXPECT_NE(error_of([&] { no_val.val_batch(0, 1, 1); }).find("0 tokens"), std::string::npos);
  EXPECT_THROW(TokenDataset(file, 1.0), uoe::Error);
  EXPECT_THROW(TokenDataset(file, -0.1), uoe::Error);
  EXPECT_THROW(ds.train_batch(0, 0, 0, 4), uoe::Error);
}

}  // namespace
