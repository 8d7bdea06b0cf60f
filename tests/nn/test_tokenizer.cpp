// Tests for nn/tokenizer.h: byte tokenizer, pre-tokenisation, BPE training (hand-computed and vs a naive trainer), JSON I/O.
#include "nn/tokenizer.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/json.h"

namespace {

using uoe::nn::BpeTokenizer;
using Merges = std::vector<std::pair<int32_t, int32_t>>;

// TinyShakespeare lives in ../shared/data relative to the repository root.
std::string shakespeare_path() {
  return (std::filesystem::path(__FILE__).parent_path() / ".." / ".." / ".." / "shared" / "data" /
          "tinyshakespeare.txt")
      .lexically_normal()
      .string();
}

// The corpus, or "" when it is not there.
std::string read_shakespeare() {
  std::ifstream in(shakespeare_path(), std::ios::binary);
  if (!in) return {};
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("uoe_tok_" + std::to_string(::getpid()) + "_" + name)).string();
}

using uoe::testing::error_of;

std::string all_bytes_and_noise() {
  std::string s;
  for (int i = 0; i < 256; ++i) s.push_back(char(i));
  std::mt19937 rng(7);
  for (int i = 0; i < 5000; ++i) s.push_back(char(rng() & 0xff));
  s += "\xff\xfe\x80 abc\xc3( \xe2\x82 caf\xc3\xa9  \n\n\t  x";  // invalid and valid UTF-8
  return s;
}

// ---- byte tokenizer ----

TEST(TokenizerByte, RoundTripArbitraryBytes) {
  auto tok = uoe::nn::make_byte_tokenizer();
  EXPECT_EQ(tok->vocab_size(), 256);
  const std::string s = all_bytes_and_noise();
  const auto ids = tok->encode(s);
  ASSERT_EQ(ids.size(), s.size());
  for (size_t i = 0; i < s.size(); ++i) EXPECT_EQ(ids[i], int32_t(uint8_t(s[i])));
  EXPECT_EQ(tok->decode(ids), s);
  EXPECT_EQ(tok->decode({}), "");
  EXPECT_NE(error_of([&] { tok->decode({1, 256}); }).find("256"), std::string::npos);
  EXPECT_NE(error_of([&] { tok->decode({-3}); }).find("-3"), std::string::npos);
}

// ---- pre-tokenisation ----

TEST(TokenizerPretokenize, SplitsLikeGpt2) {
  const std::string text = "Hello, world!  Foo\n\nbar 42x--'s";
  std::vector<std::string> got;
  for (auto c : uoe::nn::pretokenize(text)) got.emplace_back(c);
  const std::vector<std::string> want = {"Hello", ",", " world", "!", " ",  " Foo", "\n\n",
                                         "bar",   " ", "42",     "x", "--'", "s"};
  EXPECT_EQ(got, want);
  // "\n  the": the whitespace run gives its last space to the word.
  got.clear();
  for (auto c : uoe::nn::pretokenize("a\n  the \xc3\xa9t\xc3\xa9")) got.emplace_back(c);
  EXPECT_EQ(got, (std::vector<std::string>{"a", "\n ", " the", " \xc3\xa9t\xc3\xa9"}));
  EXPECT_TRUE(uoe::nn::pretokenize("").empty());
  // Chunks always concatenate back to the text.
  const std::string noise = all_bytes_and_noise();
  std::string joined;
  for (auto c : uoe::nn::pretokenize(noise)) {
    EXPECT_FALSE(c.empty());
    joined += c;
  }
  EXPECT_EQ(joined, noise);
}

// ---- BPE: hand-computed merges ----

TEST(TokenizerBpe, HandComputedMerges) {
  // Chunks "aaab", " aab", " ab". Counts: (a,a)=3 (overlaps count), (a,b)=3, (' ',a)=2.
  // 1. tie (a,a)/(a,b) at 3 -> smaller pair (97,97) = 256:  [256 97 98] [32 256 98] [32 97 98]
  // 2. (97,98) has 2 -> 257:                                 [256 257] [32 256 98] [32 257]
  // 3. all pairs have 1 -> smallest (32,256) = 258:          [256 257] [258 98] [32 257]
  // 4. (32,257) = 259, 5. (256,257) = 260, 6. (258,98) = 261, then no pair is left.
  const std::string text = "aaab aab ab";
  auto tok = uoe::nn::train_bpe(text, 300);
  EXPECT_EQ(tok->merges(), (Merges{{97, 97}, {97, 98}, {32, 256}, {32, 257}, {256, 257}, {258, 98}}));
  EXPECT_EQ(tok->vocab_size(), 262);  // stopped early
  EXPECT_EQ(tok->encode(text), (std::vector<int32_t>{260, 261, 259}));
  EXPECT_EQ(tok->token_bytes(260), "aaab");
  EXPECT_EQ(tok->encode("aaaa"), (std::vector<int32_t>{256, 256}));  // left to right, not overlapping
  EXPECT_EQ(tok->encode("aaa"), (std::vector<int32_t>{256, 97}));

  auto two = uoe::nn::train_bpe(text, 258);
  EXPECT_EQ(two->merges(), (Merges{{97, 97}, {97, 98}}));
  EXPECT_EQ(two->vocab_size(), 258);

  // Frequencies weight the counts: chunks "cd" x1, " cd" x2, " ab" x1.
  // (c,d)=3 -> 256; (32,256)=2 -> 257; tie (32,97)/(97,98) at 1 -> (32,97) = 258; (258,98) = 259.
  auto freq = uoe::nn::train_bpe("cd cd cd ab", 1000);
  EXPECT_EQ(freq->merges(), (Merges{{99, 100}, {32, 256}, {32, 97}, {258, 98}}));
  // Merges never cross a chunk boundary: "a,a" has only chunks "a" "," "a".
  EXPECT_TRUE(uoe::nn::train_bpe("a,a,a,a", 300)->merges().empty());
}

TEST(TokenizerBpe, TrainErrorsAndEdgeCases) {
  EXPECT_NE(error_of([] { uoe::nn::train_bpe("abc", 255); }).find("vocab_size"), std::string::npos);
  auto empty = uoe::nn::train_bpe("", 512);
  EXPECT_EQ(empty->vocab_size(), 256);
  const std::string noise = all_bytes_and_noise();
  EXPECT_EQ(empty->decode(empty->encode(noise)), noise);
  EXPECT_NE(error_of([&] { empty->decode({0, 300}); }).find("300"), std::string::npos);
  EXPECT_NE(error_of([] { BpeTokenizer({{97, 256}}); }).find("256"), std::string::npos);  // not yet defined
  EXPECT_NE(error_of([] { BpeTokenizer({{97, 98}, {97, 98}}); }).find("repeats"), std::string::npos);
}

// Merging a token with itself doubles its length: 40 such merges (a tokenizer.json of a few hundred bytes) would
// need terabytes. Found by the fuzzer: the loader allocated until std::bad_alloc. Now one error, before allocating.
TEST(TokenizerBpe, TokensOfAbsurdTotalLengthAreRefused) {
  Merges doubling = {{97, 97}};
  for (int32_t id = 256; id < 296; ++id) doubling.push_back({id, id});
  const std::string msg = error_of([&] { BpeTokenizer{doubling}; });
  EXPECT_NE(msg.find("merge 24 (279, 279) makes a token of 33554432 bytes"), std::string::npos) << msg;
  doubling.resize(20);  // tokens of up to 2^20 bytes: allowed
  EXPECT_EQ(BpeTokenizer(doubling).token_bytes(275), std::string(size_t(1) << 20, 'a'));
}

// ---- BPE vs a naive trainer (full recount per merge) ----

Merges naive_train(const std::string& text, int64_t vocab) {
  std::map<std::string, int64_t> freq;
  for (auto c : uoe::nn::pretokenize(text)) freq[std::string(c)] += 1;
  std::vector<std::pair<std::vector<int32_t>, int64_t>> chunks;
  for (const auto& [s, f] : freq) chunks.push_back({std::vector<int32_t>(s.begin(), s.end()), f});
  for (auto& [ids, f] : chunks)
    for (auto& id : ids) id = int32_t(uint8_t(char(id)));
  Merges merges;
  while (256 + int64_t(merges.size()) < vocab) {
    std::map<std::pair<int32_t, int32_t>, int64_t> counts;
    for (const auto& [ids, f] : chunks)
      for (size_t i = 0; i + 1 < ids.size(); ++i) counts[{ids[i], ids[i + 1]}] += f;
    if (counts.empty()) break;
    auto best = counts.begin();  // std::map order: ties keep the smallest pair
    for (auto it = counts.begin(); it != counts.end(); ++it)
      if (it->second > best->second) best = it;
    const int32_t id = 256 + int32_t(merges.size());
    merges.push_back(best->first);
    for (auto& [ids, f] : chunks) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < ids.size();) {
        if (i + 1 < ids.size() && std::make_pair(ids[i], ids[i + 1]) == best->first) {
          out.push_back(id);
          i += 2;
        } else {
          out.push_back(ids[i++]);
        }
      }
      ids = out;
    }
  }
  return merges;
}

std::string sample_text() {
  std::string s = read_shakespeare();
  if (!s.empty()) return s.substr(0, 30000);
  // Generated fallback: words from a small alphabet with punctuation and numbers.
  std::mt19937 rng(3);
  const char* words[] = {"the", "then", "than", "there", "thee", "thou", "art", "hart", "heart", "42", "7"};
  for (int i = 0; i < 6000; ++i) {
    s += words[rng() % 11];
    s += (rng() % 9 == 0) ? ",\n" : " ";
  }
  return s;
}

TEST(TokenizerBpe, MatchesNaiveTrainerAndNaiveEncoder) {
  const std::string text = sample_text();
  auto tok = uoe::nn::train_bpe(text, 420);
  const Merges want = naive_train(text, 420);
  EXPECT_EQ(tok->merges(), want);
  // Encoding = applying each merge in order to each chunk (the naive way).
  std::vector<int32_t> naive;
  for (auto c : uoe::nn::pretokenize(text)) {
    std::vector<int32_t> ids;
    for (char ch : c) ids.push_back(int32_t(uint8_t(ch)));
    for (size_t m = 0; m < want.size(); ++m) {
      std::vector<int32_t> out;
      for (size_t i = 0; i < ids.size();) {
        if (i + 1 < ids.size() && ids[i] == want[m].first && ids[i + 1] == want[m].second) {
          out.push_back(256 + int32_t(m));
          i += 2;
        } else {
          out.push_back(ids[i++]);
        }
      }
      ids = out;
    }
    naive.insert(naive.end(), ids.begin(), ids.end());
  }
  EXPECT_EQ(tok->encode(text), naive);
}

// ---- BPE on TinyShakespeare ----

TEST(TokenizerBpe, RoundTripAndCompressionOnShakespeare) {
  const std::string all = read_shakespeare();
  if (all.empty()) GTEST_SKIP() << "corpus not found at " << shakespeare_path();
  const std::string train = all.substr(0, 200000);
  auto tok = uoe::nn::train_bpe(train, 512);
  ASSERT_EQ(tok->vocab_size(), 512);
  const auto ids = tok->encode(train);
  EXPECT_EQ(tok->decode(ids), train);
  const double ratio = double(train.size()) / double(ids.size());
  EXPECT_GT(ratio, 1.5) << "bytes/token " << ratio;
  for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 512);
  // Unseen text and arbitrary bytes also round-trip.
  const std::string rest = all.substr(200000, 100000);
  EXPECT_EQ(tok->decode(tok->encode(rest)), rest);
  const std::string noise = all_bytes_and_noise();
  EXPECT_EQ(tok->decode(tok->encode(noise)), noise);
  std::string long_run(20000, '-');  // one long chunk
  EXPECT_EQ(tok->decode(tok->encode(long_run)), long_run);
}

// ---- JSON ----

TEST(TokenizerJson, SaveLoadRoundTrip) {
  const std::string text = sample_text();
  auto tok = uoe::nn::train_bpe(text, 300);
  const std::string path = temp_path("bpe.json");
  uoe::nn::save_tokenizer(*tok, path);
  auto loaded = uoe::nn::load_tokenizer(path);
  std::filesystem::remove(path);
  EXPECT_EQ(loaded->vocab_size(), tok->vocab_size());
  EXPECT_EQ(loaded->to_json(), tok->to_json());
  EXPECT_EQ(loaded->encode(text), tok->encode(text));
  const std::string noise = all_bytes_and_noise();
  EXPECT_EQ(loaded->encode(noise), tok->encode(noise));
  const auto j = tok->to_json();
  EXPECT_EQ(j.at("type").as_string(), "bpe");
  EXPECT_EQ(j.at("merges").size(), size_t(tok->vocab_size() - 256));

  auto byte = uoe::nn::make_byte_tokenizer();
  EXPECT_EQ(byte->to_json().dump(), "{\"type\":\"byte\"}");
  uoe::nn::save_tokenizer(*byte, path);
  auto byte2 = uoe::nn::load_tokenizer(path);
  std::filesystem::remove(path);
  EXPECT_EQ(byte2->vocab_size(), 256);
  EXPECT_EQ(byte2->encode(noise), byte->encode(noise));
}

TEST(TokenizerJson, BadFieldsAreNamed) {
  struct Case {
    const char* json;
    const char* needle;
  };
  const Case cases[] = {
      {"[]", "object"},
      {"{}", "\"type\""},
      {"{\"type\": 3}", "\"type\""},
      {"{\"type\": \"wordpiece\"}", "wordpiece"},
      {"{\"type\": \"bpe\"}", "\"merges\""},
      {"{\"type\": \"bpe\", \"merges\": 5}", "\"merges\""},
      {"{\"type\": \"bpe\", \"merges\": [[1]]}", "\"merges\"[0]"},
      {"{\"type\": \"bpe\", \"merges\": [[1, \"a\"]]}", "\"merges\"[0][1]"},
      {"{\"type\": \"bpe\", \"merges\": [[1, 2.5]]}", "\"merges\"[0][1]"},
      {"{\"type\": \"bpe\", \"merges\": [[97, 98], [300, 1]]}", "\"merges\"[1][0]"},
      {"{\"type\": \"bpe\", \"merges\": [[97, -1]]}", "\"merges\"[0][1]"},
      {"{\"type\": \"bpe\", \"merges\": [[97, 98]], \"vocab_size\": 300}", "\"vocab_size\""},
      {"{\"type\": \"bpe\", \"version\": 2, \"merges\": []}", "\"version\""},
      {"{\"type\": \"bpe\", \"merges\": [[97, 98], [97, 98]]}", "\"merges\""},
  };
  for (const auto& c : cases) {
    const auto v = uoe::json::parse(c.json);
    const std::string msg = error_of([&] { uoe::nn::tokenizer_from_json(v); });
    EXPECT_NE(msg.find(c.needle), std::string::npos) << c.json << " gave: " << msg;
  }
  const std::string missing = temp_path("no_such_tokenizer.json");
  EXPECT_NE(error_of([&] { uoe::nn::load_tokenizer(missing); }).find(missing), std::string::npos);
  // A file with a bad field: the error names the file and the field.
  const std::string bad = temp_path("bad_tokenizer.json");
  { std::ofstream(bad) << "{\"type\": \"bpe\", \"merges\": [[1, 999]]}"; }
  const std::string msg = error_of([&] { uoe::nn::load_tokenizer(bad); });
  std::filesystem::remove(bad);
  EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  EXPECT_NE(msg.find("\"merges\"[0][1]"), std::string::npos) << msg;
}

}  // namespace
