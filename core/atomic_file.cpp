// Atomic file writes (temporary, fsync, rename), whole-file reads, and atomic directory checkpoints.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "core/error.h"

namespace uoe {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int e) { return std::system_category().message(e); }

std::string parent_dir(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? std::string(".") : parent.string();
}

// fsyncs a file or directory. Directories on file systems that cannot fsync them (EINVAL) are skipped.
void fsync_path(const std::string& path, bool is_dir, const std::string& context) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | (is_dir ? O_DIRECTORY : 0));
  if (fd < 0) fail("[file] ", context, ": cannot open '", path, "' to fsync it: ", errno_text(errno));
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  const int e = errno;
  ::close(fd);
  if (rc != 0 && !(is_dir && (e == EINVAL || e == EROFS)))
    fail("[file] ", context, ": fsync of '", path, "' failed: ", errno_text(e));
}

bool path_exists(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

void remove_tree(const std::string& path, const std::string& context) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) fail("[file] ", context, ": cannot remove '", path, "': ", ec.message());
}

// Best-effort removal while another error is already being reported.
void remove_tree_quietly(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
}

void rename_or_fail(const std::string& from, const std::string& to, const std::string& context) {
  if (::rename(from.c_str(), to.c_str()) != 0)
    fail("[file] ", context, ": cannot rename '", from, "' to '", to, "': ", errno_text(errno));
}

std::string strip_trailing_slashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// The start of the temporaries a process of this host writes `path` into: `path.tmp-<host>-`, then its pid (a
// directory), or its pid, '-' and a counter (a file).
std::string temporary_prefix(const std::string& path) {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = 0;
  return path + ".tmp-" + host + "-";
}

// The writer's pid in what follows temporary_prefix: "<pid>" or "<pid>-<n>"; 0 for anything else.
long temporary_writer(const std::string& suffix) {
  const size_t digits = suffix.find_first_not_of("0123456789");
  if (digits == 0) return 0;
  if (digits != std::string::npos &&
      (suffix[digits] != '-' || digits + 1 == suffix.size() ||
       suffix.find_first_not_of("0123456789", digits + 1) != std::string::npos))
    return 0;
  return std::strtol(suffix.c_str(), nullptr, 10);
}

// Removes the temporaries of `path` left by processes of this host that died while writing it (their pid is
// gone), which nothing would otherwise remove: a checkpoint's is a whole checkpoint's size, a token file's the
// whole corpus's. A running writer's is kept.
void remove_stale_temporaries(const std::string& path, const std::string& context) {
  const std::string prefix = fs::path(temporary_prefix(path)).filename().string();
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(parent_dir(path), ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(prefix, 0) != 0) continue;
    const long pid = temporary_writer(name.substr(prefix.size()));
    if (pid > 0 && ::kill(pid_t(pid), 0) != 0 && errno == ESRCH) remove_tree(entry.path().string(), context);
  }
}


}  // namespace

void write_file_atomic(const std::string& path, const std::string& bytes) {
  write_file_atomic(path, [&](const ByteSink& sink) { sink(bytes.data(), bytes.size()); });
}

void write_file_atomic(const std::string& path, const std::function<void(const ByteSink& sink)>& produce) {
  static std::atomic<uint64_t> counter{0};
  const std::string what = "cannot write '" + path + "'";

  remove_stale_temporaries(path, what);
  struct stat old_st;
  const bool keep_mode = ::stat(path.c_str(), &old_st) == 0 && S_ISREG(old_st.st_mode);

  // A fresh temporary next to `path`; O_EXCL never reuses someone else's file. Mode 0666 lets
  // the umask decide, as for an ordinary new file.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = temporary_prefix(path) + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) fail("[file] ", what, ": cannot create the temporary '", tmp, "': ", errno_text(errno));

  FILE* f = ::fdopen(fd, "wb");
  const auto abort_write = [&](const char* step, int e) {
    if (f) std::fclose(f);
    else if (fd >= 0) ::close(fd);
    f = nullptr;
    fd = -1;
    ::unlink(tmp.c_str());
    fail("[file] ", what, ": ", step, " failed: ", errno_text(e));
  };
  if (!f) abort_write("fdopen", errno);
  try {
    produce([&](const void* data, size_t size) {
      if (!f) fail("[file] ", what, ": bytes handed over after the write failed");
      if (size && std::fwrite(data, 1, size, f) != size) abort_write("fwrite", errno);
    });
  } catch (...) {  // from `produce`, or a failed fwrite (already cleaned up)
    if (f) {
      std::fclose(f);
      ::unlink(tmp.c_str());
    }
    throw;
  }
  if (std::fflush(f) != 0) abort_write("fflush", errno);
  if (keep_mode && ::fchmod(fd, old_st.st_mode & 07777) != 0) abort_write("fchmod", errno);
  int rc;
  do rc = ::fsync(fd);
  while (rc != 0 && errno == EINTR);
  if (rc != 0) abort_write("fsync", errno);
  const int close_rc = std::fclose(f);
  f = nullptr;
  fd = -1;
  if (close_rc != 0) abort_write("fclose", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) abort_write("rename of the temporary over it", errno);
  fsync_path(parent_dir(path), true, what);
}

namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

// Why `path` could not be opened or stat'ed (errno `e`), in words: a dangling link names its missing target.
std::string why_unreadable(const std::string& path, int e) {
  struct stat st;
  if (e == ENOENT && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    std::error_code ec;
    return "it is a symbolic link to the missing '" + fs::read_symlink(path, ec).string() + "'";
  }
  if (e == ELOOP) return "it is a loop of symbolic links (" + errno_text(e) + ")";
  return errno_text(e);
}

}  // namespace

std::string not_a_regular_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return why_unreadable(path, errno);
  return S_ISREG(st.st_mode) ? "" : std::string("it is ") + file_kind(st.st_mode) + ", not a regular file";
}

int open_regular_file(const std::string& path) {
  // Looked at before opening: opening a FIFO waits for a writer, a device may act on being opened.
  if (const std::string why = not_a_regular_file(path); !why.empty()) fail("[file] cannot read '", path, "': ", why);
  struct stat st;
  // O_NONBLOCK: were it replaced by a FIFO since, the open returns at once and fstat refuses it (regular files
  // ignore the flag).
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("[file] cannot read '", path, "': ", why_unreadable(path, errno));
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("[file] cannot read '", path, "': it changed into ", file_kind(st.st_mode), " while being opened");
  }
  return fd;
}

std::string read_file_bytes(const std::string& path, size_t max_bytes) {
  const int fd = open_regular_file(path);
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail("[file] cannot read '", path, "': ", errno_text(e));
  }
  std::string out(std::min(size_t(st.st_size), max_bytes), '\0');
  size_t n = 0;
  char chunk[65536];
  while (n < max_bytes) {
    // Fill the pre-sized buffer first; past its end (a file that grew) read in chunks.
    char* dst = n < out.size() ? &out[n] : chunk;
    const size_t cap = std::min(n < out.size() ? out.size() - n : sizeof chunk, max_bytes - n);
    const ssize_t r = ::read(fd, dst, cap);
    if (r < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      fail("[file] cannot read '", path, "': ", errno_text(e));
    }
    if (r == 0) break;
    if (dst == chunk) out.append(chunk, size_t(r));
    n += size_t(r);
  }
  ::close(fd);
  out.resize(n);
  return out;
}

namespace {

// An exclusive flock on the parent directory of `dir` while it lives: a writer's renames and a reader's recovery
// never interleave (a reader recovering between the writer's two renames would move the old copy back under the
// writer). Best effort where the file system has no flock: the directory cannot be opened, or flock fails.
class ParentLock {
 public:
  explicit ParentLock(const std::string& dir) : fd_(::open(parent_dir(dir).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) {
    if (fd_ >= 0)
      while (::flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
      }
  }
  ~ParentLock() {
    if (fd_ >= 0) ::close(fd_);
  }
  ParentLock(const ParentLock&) = delete;
  ParentLock& operator=(const ParentLock&) = delete;

 private:
  int fd_;
};

// recover_directory with the parent's lock already held.
void recover_locked(const std::string& dir) {
  const std::string old = dir + ".old";
  if (!path_exists(old)) return;
  const std::string context = "recovering '" + dir + "'";
  if (path_exists(dir)) {
    remove_tree(old, context);  // the new directory was already complete and in place
  } else {
    rename_or_fail(old, dir, context);  // the crash came between the two renames
  }
  fsync_path(parent_dir(dir), true, context);
}

}  // namespace

void recover_directory(const std::string& dir_in) {
  const std::string dir = strip_trailing_slashes(dir_in);
  const ParentLock lock(dir);
  recover_locked(dir);
}

void write_directory_atomic(const std::string& dir_in, const std::function<void(const std::string& tmp_dir)>& fill) {
  const std::string dir = strip_trailing_slashes(dir_in);
  UOE_CHECK(!dir.empty() && dir != "/", "[file] write_directory_atomic needs a directory path, got '", dir_in, "'");
  const std::string context = "cannot write directory '" + dir + "'";
  recover_directory(dir);

  remove_stale_temporaries(dir, context);
  const std::string tmp = temporary_prefix(dir) + std::to_string(::getpid());
  const std::string old = dir + ".old";
  remove_tree(tmp, context);  // a leftover of an earlier failure of this process id
  std::error_code ec;
  fs::create_directory(tmp, ec);
  if (ec) fail("[file] ", context, ": cannot create the temporary directory '", tmp, "': ", ec.message());

  try {
    fill(tmp);
    // Every file and directory inside, then the temporary itself, reach the disk before the rename.
    for (auto it = fs::recursive_directory_iterator(tmp, ec); !ec && it != fs::recursive_directory_iterator();
         it.increment(ec)) {
      const fs::file_status st = it->symlink_status(ec);
      if (ec) break;
      if (fs::is_regular_file(st)) fsync_path(it->path().string(), false, context);
      else if (fs::is_directory(st)) fsync_path(it->path().string(), true, context);
    }
    if (ec) fail("[file] ", context, ": cannot list '", tmp, "': ", ec.message());
    fsync_path(tmp, true, context);
  } catch (...) {
    remove_tree_quietly(tmp);
    throw;
  }

  const ParentLock lock(dir);  // from here to the end: no reader recovers in between
  const bool had_old = path_exists(dir);
  if (had_old && ::rename(dir.c_str(), old.c_str()) != 0) {
    const int e = errno;
    remove_tree_quietly(tmp);
    fail("[file] ", context, ": cannot rename '", dir, "' to '", old, "': ", errno_text(e));
  }
  if (::rename(tmp.c_str(), dir.c_str()) != 0) {
    const int e = errno;
    if (had_old) ::rename(old.c_str(), dir.c_str());  // put the previous directory back
    remove_tree_quietly(tmp);
    fail("[file] ", context, ": cannot rename '", tmp, "' to '", dir, "': ", errno_text(e));
  }
  const std::string parent = parent_dir(dir);
  fsync_path(parent, true, context);
  if (had_old) {
    remove_tree(old, context);
    fsync_path(parent, true, context);
  }
}

}  // namespace uoe
