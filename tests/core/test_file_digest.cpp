// digest_file: the same bytes give the same hash, any changed byte another; a file too large to read whole is
// hashed by evenly spaced blocks; a missing file is one error naming it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "core/error.h"
#include "core/file_digest.h"
#include "fixtures.h"

namespace uoe {
namespace {

void write(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// Overwrites one byte of `path` at `offset`.
void poke(const std::string& path, int64_t offset, char byte) {
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(offset);
  f.put(byte);
}

TEST(FileDigest, EveryByteCounts) {
  const std::string dir = test::temp_dir("digest");
  std::string text(3 * (1 << 20) + 5, 'a');  // chunks of 1 MiB, then a tail of 5 bytes
  for (size_t i = 0; i < text.size(); i += 997) text[i] = char('a' + i % 26);
  write(dir + "/a", text);
  write(dir + "/b", text);
  const FileDigest a = digest_file(dir + "/a");
  EXPECT_EQ(a.bytes, int64_t(text.size()));
  EXPECT_FALSE(a.sampled);
  EXPECT_EQ(a.hash, digest_file(dir + "/b").hash);
  EXPECT_EQ(a.hash, hash_bytes(text));
  for (const int64_t at : {int64_t(0), int64_t(1 << 20) + 3, int64_t(text.size()) - 1}) {
    poke(dir + "/b", at, 'Z');
    EXPECT_NE(digest_file(dir + "/b").hash, a.hash) << "byte " << at;
    poke(dir + "/b", at, text[size_t(at)]);
  }
  write(dir + "/b", text + std::string(1, '\0'));  // a trailing zero byte: another file
  EXPECT_NE(digest_file(dir + "/b").hash, a.hash);
  EXPECT_EQ(hex64(0x0123456789abcdefULL), "0123456789abcdef");
}

TEST(FileDigest, AHugeFileIsSampled) {
  const std::string path = test::temp_dir("digest_huge") + "/huge";
  write(path, "");
  ASSERT_EQ(::truncate(path.c_str(), kDigestFullBytes + 4096), 0);  // sparse: no disk used
  const FileDigest d = digest_file(path);
  EXPECT_TRUE(d.sampled);
  EXPECT_EQ(d.bytes, kDigestFullBytes + 4096);
  poke(path, kDigestFullBytes + 4095, 'x');  // in the last block
  EXPECT_NE(digest_file(path).hash, d.hash);
  poke(path, kDigestFullBytes + 4095, '\0');
  poke(path, 0, 'x');  // in the first
  EXPECT_NE(digest_file(path).hash, d.hash);
}

TEST(FileDigest, AMissingFileIsNamed) {
  try {
    digest_file("/nonexistent/uoe-data.txt");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[digest] cannot open '/nonexistent/uoe-data.txt'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace uoe
