// Scratch files for the fuzzer: a directory on a memory file system where there is one, and plain file writes.
#pragma once
#include <cstddef>
#include <string>

namespace uoe::fuzz {

// A new empty directory "uoe-fuzz-<tag>-XXXXXX" under /dev/shm when writable (inputs are rewritten thousands of
// times), else under $TMPDIR or /tmp; removed with everything in it when the object dies.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Replaces the content of `path` with `size` bytes (no fsync: scratch files need no durability). Failures throw
// std::runtime_error: they are the machine's, not the reader's, and must not pass for a clean rejection.
void write_bytes(const std::string& path, const void* data, size_t size);
inline void write_bytes(const std::string& path, const std::string& bytes) {
  write_bytes(path, bytes.data(), bytes.size());
}

}  // namespace uoe::fuzz
