// Byte-level BPE: encoding with a merge-rank heap, decoding, and training with incremental pair counts.
#include <algorithm>
#include <queue>
#include <string>
#include <unordered_map>

#include "core/error.h"
#include "nn/tokenizer.h"

namespace uoe::nn {

namespace {

inline uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }
inline int32_t key_first(uint64_t k) { return int32_t(k >> 32); }
inline int32_t key_second(uint64_t k) { return int32_t(k & 0xffffffffu); }

// The bytes of every id are kept, and a merge of an id with itself doubles a token's length: 40 merges in a
// tokenizer.json of a few hundred bytes would ask for terabytes. Vocabularies trained on text hold well under
// a megabyte in all (GPT-2's 50k tokens, about 300 KB); this bound refuses the others before allocating.
constexpr uint64_t kMaxTokenBytes = uint64_t(1) << 26;

}  // namespace

struct BpeTokenizer::RankTable {
  std::unordered_map<uint64_t, int32_t> rank;  // pair_key(a, b) -> merge index
  int32_t find(int32_t a, int32_t b) const {
    auto it = rank.find(pair_key(a, b));
    return it == rank.end() ? -1 : it->second;
  }
};

BpeTokenizer::BpeTokenizer(std::vector<std::pair<int32_t, int32_t>> merges) : merges_(std::move(merges)) {
  UOE_CHECK(merges_.size() <= size_t(INT32_MAX - 256), "[BpeTokenizer] too many merges: ", merges_.size());
  auto table = std::make_shared<RankTable>();
  table->rank.reserve(merges_.size() * 2);
  bytes_.reserve(256 + merges_.size());
  for (int i = 0; i < 256; ++i) bytes_.emplace_back(1, char(uint8_t(i)));
  uint64_t total_bytes = 256;
  for (size_t i = 0; i < merges_.size(); ++i) {
    const auto [a, b] = merges_[i];
    const int64_t limit = 256 + int64_t(i);
    UOE_CHECK(a >= 0 && a < limit && b >= 0 && b < limit, "[BpeTokenizer] merge ", i, " is (", a, ", ", b,
              "): both ids must be in [0, ", limit, ") (earlier ids only)");
    const bool fresh = table->rank.emplace(pair_key(a, b), int32_t(i)).second;
    UOE_CHECK(fresh, "[BpeTokenizer] merge ", i, " (", a, ", ", b, ") repeats merge ", table->find(a, b));
    const uint64_t length = bytes_[a].size() + bytes_[b].size();
    total_bytes += length;
    UOE_CHECK(total_bytes <= kMaxTokenBytes, "[BpeTokenizer] merge ", i, " (", a, ", ", b, ") makes a token of ",
              length, " bytes, and the tokens up to it hold ", total_bytes, " bytes in all; the limit is ",
              kMaxTokenBytes, " (a vocabulary trained on text stays far below it)");
    bytes_.push_back(bytes_[a] + bytes_[b]);
  }
  ranks_ = std::move(table);
}

const std::string& BpeTokenizer::token_bytes(int32_t id) const {
  UOE_CHECK(id >= 0 && id < vocab_size(), "[BpeTokenizer] id ", id, " is out of range [0, ", vocab_size(), ")");
  return bytes_[size_t(id)];
}

// Applies the merges in rank order with a min-heap of (rank, position) over a linked list of
// symbols: O(n log n) in the chunk length n. A merge of rank r creates only pairs containing
// id 256 + r, whose ranks are > r, so all occurrences of rank r are merged (leftmost first)
// before any higher rank, exactly like training's left-to-right pass.
void BpeTokenizer::encode_chunk(std::string_view chunk, std::vector<int32_t>& out) const {
  const int64_t n = int64_t(chunk.size());
  if (n == 0) return;
  std::vector<int32_t> sym(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) sym[size_t(i)] = int32_t(uint8_t(chunk[size_t(i)]));
  if (n == 1 || merges_.empty()) {
    out.insert(out.end(), sym.begin(), sym.end());
    return;
  }
  std::vector<int64_t> prev(static_cast<size_t>(n)), next(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    prev[size_t(i)] = i - 1;
    next[size_t(i)] = i + 1 < n ? i + 1 : -1;
  }
  std::vector<char> alive(size_t(n), 1);
  using Entry = std::pair<int32_t, int64_t>;  // (rank, position of the left symbol)
  std::priority_queue<Entry, std::vector<Entry>, std::greater<Entry>> heap;
  const RankTable& table = *ranks_;
  for (int64_t i = 0; i + 1 < n; ++i) {
    const int32_t r = table.find(sym[size_t(i)], sym[size_t(i + 1)]);
    if (r >= 0) heap.emplace(r, i);
  }
  while (!heap.empty()) {
    const auto [r, p] = heap.top();
    heap.pop();
    if (!alive[size_t(p)]) continue;
    const int64_t q = next[size_t(p)];
    if (q < 0 || table.find(sym[size_t(p)], sym[size_t(q)]) != r) continue;  // stale entry
    sym[size_t(p)] = 256 + r;
    alive[size_t(q)] = 0;
    next[size_t(p)] = next[size_t(q)];
    if (next[size_t(q)] >= 0) prev[size_t(next[size_t(q)])] = p;
    if (const int64_t l = prev[size_t(p)]; l >= 0) {
      const int32_t r2 = table.find(sym[size_t(l)], sym[size_t(p)]);
      if (r2 >= 0) heap.emplace(r2, l);
    }
    if (const int64_t nx = next[size_t(p)]; nx >= 0) {
      const int32_t r2 = table.find(sym[size_t(p)], sym[size_t(nx)]);
      if (r2 >= 0) heap.emplace(r2, p);
    }
  }
  for (int64_t i = 0; i >= 0; i = next[size_t(i)]) out.push_back(sym[size_t(i)]);
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 16);
  // Natural text repeats its words: encode each distinct chunk once per call.
  std::unordered_map<std::string_view, std::pair<size_t, size_t>> cache;  // chunk -> [begin, end) in out
  for (std::string_view chunk : pretokenize(text)) {
    if (chunk.size() <= 1) {
      if (!chunk.empty()) out.push_back(int32_t(uint8_t(chunk[0])));
      continue;
    }
    if (auto it = cache.find(chunk); it != cache.end()) {
      const auto [b, e] = it->second;
      for (size_t i = b; i < e; ++i) out.push_back(out[i]);  // index loop: push_back may reallocate
      continue;
    }
    const size_t begin = out.size();
    encode_chunk(chunk, out);
    cache.emplace(chunk, std::make_pair(begin, out.size()));
  }
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    UOE_CHECK(id >= 0 && id < vocab_size(), "[BpeTokenizer::decode] id ", id, " at position ", i,
              " is out of range [0, ", vocab_size(), ")");
    out += bytes_[size_t(id)];
  }
  return out;
}

json::Value BpeTokenizer::to_json() const {
  json::Value merges = json::Value::array();
  for (const auto& [a, b] : merges_) {
    json::Value pair = json::Value::array();
    pair.push_back(json::Value(int64_t(a)));
    pair.push_back(json::Value(int64_t(b)));
    merges.push_back(std::move(pair));
  }
  json::Value v = json::Value::object();
  v["type"] = json::Value(std::string("bpe"));
  v["version"] = json::Value(int64_t(1));
  v["vocab_size"] = json::Value(vocab_size());
  v["merges"] = std::move(merges);
  return v;
}

// ---------------------------------------------------------------------------------------------
// Training.
// Every distinct chunk is kept once, as its current id sequence, with its number of occurrences
// `freq`. pair_count[p] = sum over chunks of freq * (adjacent occurrences of p). The best pair is
// taken from a max-heap of (count, a, b) with lazy deletion (an entry is valid while its count
// equals pair_count). Merging p rewrites only the chunks listed in where[p]; for each, the pairs
// of the old sequence are subtracted and those of the new sequence added, and the changed
// counts are pushed to the heap.
// ---------------------------------------------------------------------------------------------
namespace {

struct HeapEntry {
  int64_t count;
  int32_t a, b;
};
// Priority: higher count first, then the smaller pair (a, b).
struct HeapLess {
  bool operator()(const HeapEntry& x, const HeapEntry& y) const {
    if (x.count != y.count) return x.count < y.count;
    if (x.a != y.a) return x.a > y.a;
    return x.b > y.b;
  }
};

struct TrainChunk {
  std::vector<int32_t> ids;
  int64_t freq = 0;
};

// Left-to-right, non-overlapping replacement of (a, b) by `id`.
void merge_pair(const std::vector<int32_t>& in, int32_t a, int32_t b, int32_t id, std::vector<int32_t>& out) {
  out.clear();
  for (size_t i = 0; i < in.size();) {
    if (i + 1 < in.size() && in[i] == a && in[i + 1] == b) {
      out.push_back(id);
      i += 2;
    } else {
      out.push_back(in[i]);
      i += 1;
    }
  }
}

}  // namespace

std::unique_ptr<BpeTokenizer> train_bpe(std::string_view text, int64_t vocab_size) {
  UOE_CHECK(vocab_size >= 256, "[train_bpe] vocab_size must be >= 256 (the byte ids), got ", vocab_size);
  UOE_CHECK(vocab_size <= int64_t(INT32_MAX), "[train_bpe] vocab_size ", vocab_size, " is too large");
  const int64_t n_merges = vocab_size - 256;

  // Distinct chunks with their frequencies, in first-occurrence order.
  std::vector<TrainChunk> chunks;
  {
    std::unordered_map<std::string_view, size_t> index;
    for (std::string_view c : pretokenize(text)) {
      if (c.size() < 2) continue;  // a single byte never takes part in a merge
      auto [it, fresh] = index.emplace(c, chunks.size());
      if (fresh) {
        TrainChunk tc;
        tc.ids.reserve(c.size());
        for (char ch : c) tc.ids.push_back(int32_t(uint8_t(ch)));
        chunks.push_back(std::move(tc));
      }
      chunks[it->second].freq += 1;
    }
  }

  std::unordered_map<uint64_t, int64_t> pair_count;
  std::unordered_map<uint64_t, std::vector<int32_t>> where;  // pair -> chunks that (may) hold it
  auto note_where = [&](uint64_t k, int32_t ci) {
    auto& list = where[k];
    if (list.empty() || list.back() != ci) list.push_back(ci);
  };
  for (size_t ci = 0; ci < chunks.size(); ++ci) {
    const auto& ids = chunks[ci].ids;
    for (size_t i = 0; i + 1 < ids.size(); ++i) {
      const uint64_t k = pair_key(ids[i], ids[i + 1]);
      pair_count[k] += chunks[ci].freq;
      note_where(k, int32_t(ci));
    }
  }
  std::priority_queue<HeapEntry, std::vector<HeapEntry>, HeapLess> heap;
  for (const auto& [k, c] : pair_count) heap.push({c, key_first(k), key_second(k)});

  std::vector<std::pair<int32_t, int32_t>> merges;
  merges.reserve(size_t(n_merges));
  std::unordered_map<uint64_t, int64_t> delta;
  std::vector<int64_t> visited(chunks.size(), -1);  // merge index that last rewrote the chunk
  std::vector<int32_t> scratch;
  while (int64_t(merges.size()) < n_merges) {
    // The best valid entry.
    bool found = false;
    HeapEntry best{};
    while (!heap.empty()) {
      best = heap.top();
      heap.pop();
      auto it = pair_count.find(pair_key(best.a, best.b));
      if (it != pair_count.end() && it->second == best.count && best.count > 0) {
        found = true;
        break;
      }
    }
    if (!found) break;  // no adjacent pair left anywhere
    const int64_t m = int64_t(merges.size());
    const int32_t id = int32_t(256 + m);
    merges.emplace_back(best.a, best.b);
    const uint64_t best_key = pair_key(best.a, best.b);

    delta.clear();
    std::vector<int32_t> list = std::move(where[best_key]);
    where.erase(best_key);
    for (int32_t ci : list) {
      if (visited[size_t(ci)] == m) continue;
      visited[size_t(ci)] = m;
      TrainChunk& ch = chunks[size_t(ci)];
      merge_pair(ch.ids, best.a, best.b, id, scratch);
      if (scratch.size() == ch.ids.size()) continue;  // stale listing: the pair is gone here
      for (size_t i = 0; i + 1 < ch.ids.size(); ++i) delta[pair_key(ch.ids[i], ch.ids[i + 1])] -= ch.freq;
      for (size_t i = 0; i + 1 < scratch.size(); ++i) {
        const uint64_t k = pair_key(scratch[i], scratch[i + 1]);
        delta[k] += ch.freq;
        if (scratch[i] == id || scratch[i + 1] == id) note_where(k, ci);
      }
      ch.ids.swap(scratch);
    }
    for (const auto& [k, d] : delta) {
      if (d == 0) continue;
      int64_t& c = pair_count[k];
      c += d;
      if (c > 0) {
        heap.push({c, key_first(k), key_second(k)});
      } else {
        pair_count.erase(k);
      }
    }
  }
  return std::make_unique<BpeTokenizer>(std::move(merges));
}

}  // namespace uoe::nn
