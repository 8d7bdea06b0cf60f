// Crash-safe file and directory writes (temporary + fsync + rename) and whole-file reads.
#pragma once
#include <cstdint>
#include <functional>
#include <string>

namespace uoe {

// Writes `bytes` to `path` atomically: a temporary file in the same directory (`path + ".tmp-<host>-<pid>-<n>"`;
// those of this host's processes that died while writing `path` are removed first), fwrite, fflush,
// fsync, rename over `path`, fsync the directory. On any error the old file stays intact, the
// temporary is removed, and the error names the path and the errno text. An existing file's
// permission bits are kept; a new file gets 0666 minus the umask.
void write_file_atomic(const std::string& path, const std::string& bytes);

// Receives a file's bytes in order, in pieces of any size.
using ByteSink = std::function<void(const void* data, size_t size)>;
// The same with the bytes streamed: `produce(sink)` hands them over in order, so a large file (a checkpoint) is
// never held in memory whole. If `produce` throws, the temporary is removed, `path` is untouched, and the
// exception propagates.
void write_file_atomic(const std::string& path, const std::function<void(const ByteSink& sink)>& produce);

// Opens `path` for reading when it is a regular file (symbolic links followed) and returns its descriptor, which
// the caller closes. Anything else is refused at once, without blocking on a FIFO or reading a device, with one
// error naming the path and what it is ("a FIFO", "a directory", "a symbolic link to the missing '...'", ...).
int open_regular_file(const std::string& path);
// Why `path` is not a regular file one can open (its errno text, "it is a FIFO (named pipe), not a regular file",
// "it is a symbolic link to the missing '...'", ...); "" when it is one.
std::string not_a_regular_file(const std::string& path);

// The content of a regular file (open_regular_file's errors), at most its first `max_bytes`; the error names the
// path (missing, not a regular file, unreadable).
std::string read_file_bytes(const std::string& path, size_t max_bytes = SIZE_MAX);

// Writes a whole directory atomically. `fill(tmp_dir)` writes the files into a fresh temporary
// directory next to `dir` (`dir + ".tmp-<host>-<pid>"`; those of this host's processes that died while writing
// are removed first); then every file and directory in it is
// fsynced, an existing `dir` is renamed to `dir + ".old"`, the temporary renamed to `dir`, the
// old one removed, and the parent directory fsynced. If `fill` throws, the temporary is removed,
// `dir` is untouched, and the exception propagates. If the process dies at any moment, either
// the previous complete `dir` or the new complete one exists once `recover_directory(dir)` has
// run (readers call it before reading; this function calls it first too).
void write_directory_atomic(const std::string& dir, const std::function<void(const std::string& tmp_dir)>& fill);

// Finishes an interrupted write_directory_atomic: a leftover `dir + ".old"` is renamed back to
// `dir` when `dir` is missing (the crash came between the two renames), and removed when `dir`
// exists (the crash came after the new directory was in place). No-op otherwise.
// Writers (their renames) and recovery take an flock of the parent directory, so a reader (uoe eval while a run
// trains) cannot recover between a writer's two renames.
void recover_directory(const std::string& dir);

}  // namespace uoe
