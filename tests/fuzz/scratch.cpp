// Scratch directories and unsynchronised file writes for the fuzz targets.
#include "scratch.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <vector>

namespace uoe::fuzz {

ScratchDir::ScratchDir(const std::string& tag) {
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string base = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm" : tmpdir && *tmpdir ? tmpdir : "/tmp";
  const std::string pattern = base + "/uoe-fuzz-" + tag + "-XXXXXX";
  std::vector<char> buf(pattern.begin(), pattern.end());
  buf.push_back('\0');
  if (!::mkdtemp(buf.data()))
    throw std::runtime_error("[fuzz] cannot create a directory " + pattern + ": " + std::strerror(errno));
  path_ = buf.data();
}

ScratchDir::~ScratchDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

void write_bytes(const std::string& path, const void* data, size_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw std::runtime_error("[fuzz] cannot write " + path + ": " + std::strerror(errno));
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error("[fuzz] cannot write " + path + ": " + std::strerror(err));
    }
    p += n;
    size -= size_t(n);
  }
  ::close(fd);
}

}  // namespace uoe::fuzz
