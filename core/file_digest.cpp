// digest_file: a word-at-a-time multiply-rotate hash (MurmurHash3's mixing steps) over the file's bytes.
#include "core/file_digest.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace uoe {
namespace {

uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

// MurmurHash3's 64-bit finaliser: every input bit reaches every output bit.
uint64_t fmix(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  return h ^ (h >> 33);
}

class Hasher {
 public:
  // Bytes in order; every call but the last passes a multiple of 8.
  void add(const char* p, size_t n) {
    for (; n >= 8; p += 8, n -= 8) {
      uint64_t w = 0;
      std::memcpy(&w, p, 8);
      word(w);
    }
    if (n > 0) {
      uint64_t w = 0;
      std::memcpy(&w, p, n);
      word(w);
    }
  }
  uint64_t finish(uint64_t length) const { return fmix(h_ ^ length); }

 private:
  void word(uint64_t w) {
    h_ ^= rotl(w * 0x87c37b91114253d5ULL, 31) * 0x4cf5ad432745937fULL;
    h_ = rotl(h_, 27) * 5 + 0x52dce729;
  }
  uint64_t h_ = 0x9e3779b97f4a7c15ULL;
};

// Reads n bytes at `offset`.
void read_block(std::ifstream& in, const std::string& path, int64_t offset, std::vector<char>& buffer, size_t n) {
  in.seekg(offset);
  in.read(buffer.data(), std::streamsize(n));
  UOE_CHECK(size_t(in.gcount()) == n, "[digest] cannot read ", n, " bytes at offset ", offset, " of '", path,
            "' (did it shrink while being read?)");
}

}  // namespace

FileDigest digest_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  UOE_CHECK(in, "[digest] cannot open '", path, "': ", std::strerror(errno));
  FileDigest d;
  d.bytes = int64_t(in.tellg());
  d.sampled = d.bytes > kDigestFullBytes;
  constexpr int64_t kChunk = int64_t(1) << 20;  // a multiple of 8: the words of the file stay whole
  std::vector<char> buffer(static_cast<size_t>(kChunk));
  Hasher h;
  if (!d.sampled) {
    for (int64_t at = 0; at < d.bytes; at += kChunk) {
      const auto n = size_t(std::min(kChunk, d.bytes - at));
      read_block(in, path, at, buffer, n);
      h.add(buffer.data(), n);
    }
  } else {
    const int64_t last = d.bytes - kDigestSampleBytes;  // block i starts at i * last / (blocks - 1)
    for (int64_t i = 0; i < kDigestSampleBlocks; ++i) {
      read_block(in, path, i * last / (kDigestSampleBlocks - 1), buffer, size_t(kDigestSampleBytes));
      h.add(buffer.data(), size_t(kDigestSampleBytes));
    }
  }
  d.hash = h.finish(uint64_t(d.bytes));
  return d;
}

uint64_t hash_bytes(std::string_view bytes) {
  Hasher h;
  h.add(bytes.data(), bytes.size());
  return h.finish(bytes.size());
}

std::string hex64(uint64_t v) {
  char s[17];
  std::snprintf(s, sizeof s, "%016llx", static_cast<unsigned long long>(v));
  return s;
}

}  // namespace uoe
