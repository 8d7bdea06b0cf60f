// A file's size and a 64-bit hash of its bytes: enough to tell whether two runs read the same data.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace uoe {

struct FileDigest {
  int64_t bytes = 0;
  uint64_t hash = 0;     // of every byte, or (sampled) of kDigestSampleBlocks evenly spaced blocks and the size
  bool sampled = false;  // the file is larger than kDigestFullBytes
};

// Files up to this size are hashed whole (about 0.3 s per GiB); larger ones by kDigestSampleBlocks evenly spaced
// blocks of kDigestSampleBytes (the first and the last included: 64 MiB read), so that starting a run on a huge
// token file does not read it all. Sampled, a change between the blocks goes unseen; the size still counts.
inline constexpr int64_t kDigestFullBytes = int64_t(1) << 30;
inline constexpr int64_t kDigestSampleBlocks = 1024, kDigestSampleBytes = int64_t(64) << 10;

// Errors name the file.
FileDigest digest_file(const std::string& path);
// The same hash of bytes in memory (a whole file's digest is hash_bytes of its contents).
uint64_t hash_bytes(std::string_view bytes);
// 16 hexadecimal digits.
std::string hex64(uint64_t v);

}  // namespace uoe
