// Atomic file and directory writes: overwrite, no leftovers, failures keep the old data, crash recovery.
#include "core/atomic_file.h"

#include <gtest/gtest.h>

#include "gradcheck.h"
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <thread>

#include "core/error.h"

namespace uoe {
namespace {

using uoe::testing::error_of;

namespace fs = std::filesystem;

// A fresh, empty directory for one test, removed afterwards.
class AtomicFile : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = ::testing::TempDir() + "uoe_atomic_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // Names in `dir`, sorted.
  static std::vector<std::string> listing(const std::string& dir) {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  static void write_plain(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

  std::string root_;
};

TEST_F(AtomicFile, WriteOverwriteRead) {
  const std::string path = root_ + "/a.bin";
  write_file_atomic(path, "hello");
  EXPECT_EQ(read_file_bytes(path), "hello");
  const std::string binary("x\0y\xff\n", 5);
  write_file_atomic(path, binary);
  EXPECT_EQ(read_file_bytes(path), binary);
  write_file_atomic(path, "");
  EXPECT_EQ(read_file_bytes(path), "");
  std::string big(3 << 20, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = char(i * 2654435761u >> 24);
  write_file_atomic(path, big);
  EXPECT_EQ(read_file_bytes(path), big);
  // Only the file itself remains: the temporaries are gone.
  EXPECT_EQ(listing(root_), std::vector<std::string>{"a.bin"});
}

TEST_F(AtomicFile, StreamedWritesConcatenateAndAFailingProducerKeepsTheOldFile) {
  const std::string path = root_ + "/streamed.bin";
  std::string expected;
  write_file_atomic(path, [&](const ByteSink& sink) {
    for (int piece = 0; piece < 100; ++piece) {
      const std::string bytes(size_t(piece * 37 % 1000), char('a' + piece % 26));
      sink(bytes.data(), bytes.size());
      expected += bytes;
    }
  });
  EXPECT_EQ(read_file_bytes(path), expected);
  // The producer throws after handing over some bytes: the error propagates, the old file stays, no temporary.
  const std::string msg = error_of([&] {
    write_file_atomic(path, [&](const ByteSink& sink) {
      sink("partial", 7);
      fail("[test] the producer failed");
    });
  });
  EXPECT_NE(msg.find("the producer failed"), std::string::npos) << msg;
  EXPECT_EQ(read_file_bytes(path), expected);
  EXPECT_EQ(listing(root_), std::vector<std::string>{"streamed.bin"});
}

TEST_F(AtomicFile, ReadersRecoveringWhileAWriterReplacesTheDirectoryDoNotBreakIt) {
  // A reader's recover_directory between the writer's two renames would move the old copy back under the writer
  // (whose second rename then fails). The parent directory's lock keeps them apart.
  const std::string dir = root_ + "/ckpt";
  std::atomic<bool> done{false};
  std::string reader_error;
  std::thread reader([&] {
    try {
      while (!done) recover_directory(dir);
    } catch (const std::exception& e) {
      reader_error = e.what();
    }
  });
  std::string writer_error;
  try {
    for (int i = 0; i < 300; ++i)
      write_directory_atomic(dir, [&](const std::string& tmp) { write_file_atomic(tmp + "/n", std::to_string(i)); });
  } catch (const std::exception& e) {
    writer_error = e.what();
  }
  done = true;
  reader.join();
  EXPECT_EQ(writer_error, "");
  EXPECT_EQ(reader_error, "");
  EXPECT_EQ(read_file_bytes(dir + "/n"), "299");
}

TEST_F(AtomicFile, NewFilesFollowTheUmaskAndOldFilesKeepTheirMode) {
  const std::string path = root_ + "/mode.txt";
  write_plain(path, "old");
  ASSERT_EQ(::chmod(path.c_str(), 0640), 0);
  write_file_atomic(path, "new");
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  // A new file is not left with mkstemp's 0600 mode (unless the umask asks for it).
  const mode_t mask = ::umask(022);
  ::umask(mask);
  const std::string fresh = root_ + "/fresh.txt";
  write_file_atomic(fresh, "x");
  ASSERT_EQ(::stat(fresh.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0666u & ~mask);
}

TEST_F(AtomicFile, ErrorsNameThePathAndLeaveNoTemporary) {
  const std::string missing_dir = root_ + "/no/such/dir/f.txt";
  const std::string msg = error_of([&] { write_file_atomic(missing_dir, "x"); });
  EXPECT_NE(msg.find(missing_dir), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file or directory"), std::string::npos) << msg;

  // Renaming a file over a directory fails: the directory stays, the temporary is removed.
  const std::string dir_target = root_ + "/target";
  fs::create_directory(dir_target);
  const std::string msg2 = error_of([&] { write_file_atomic(dir_target, "x"); });
  EXPECT_NE(msg2.find(dir_target), std::string::npos) << msg2;
  EXPECT_TRUE(fs::is_directory(dir_target));
  EXPECT_EQ(listing(root_), std::vector<std::string>{"target"});

  const std::string nofile = root_ + "/missing.txt";
  const std::string msg3 = error_of([&] { read_file_bytes(nofile); });
  EXPECT_NE(msg3.find(nofile), std::string::npos) << msg3;
  EXPECT_NE(msg3.find("No such file or directory"), std::string::npos) << msg3;
  EXPECT_NE(error_of([&] { read_file_bytes(dir_target); }).find("is a directory"), std::string::npos);
}

TEST_F(AtomicFile, DirectoryWriteReplacesTheWholeDirectory) {
  const std::string dir = root_ + "/ckpt";
  write_directory_atomic(dir, [](const std::string& tmp) {
    char host[256] = {};
    ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
    EXPECT_NE(tmp.find("ckpt.tmp-" + std::string(host) + "-" + std::to_string(::getpid())), std::string::npos);
    write_file_atomic(tmp + "/model.bin", "weights-1");
    std::ofstream(tmp + "/config.json") << "{}";
    fs::create_directory(tmp + "/sub");
    std::ofstream(tmp + "/sub/extra.txt") << "extra";
  });
  EXPECT_EQ(listing(dir), (std::vector<std::string>{"config.json", "model.bin", "sub"}));
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "weights-1");
  EXPECT_EQ(read_file_bytes(dir + "/sub/extra.txt"), "extra");
  // The second write replaces every file: the old ones do not linger.
  write_directory_atomic(dir + "/", [](const std::string& tmp) { write_file_atomic(tmp + "/model.bin", "weights-2"); });
  EXPECT_EQ(listing(dir), std::vector<std::string>{"model.bin"});
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "weights-2");
  EXPECT_EQ(listing(root_), std::vector<std::string>{"ckpt"});  // no .tmp-<host>-<pid>, no .old
}

TEST_F(AtomicFile, FailingFillLeavesTheOldDirectoryIntact) {
  const std::string dir = root_ + "/ckpt";
  write_directory_atomic(dir, [](const std::string& tmp) { write_file_atomic(tmp + "/model.bin", "good"); });
  EXPECT_THROW(write_directory_atomic(dir,
                                      [](const std::string& tmp) {
                                        write_file_atomic(tmp + "/model.bin", "half-written");
                                        throw std::runtime_error("disk full (simulated)");
                                      }),
               std::runtime_error);
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "good");
  EXPECT_EQ(listing(root_), std::vector<std::string>{"ckpt"});
  // A uoe::Error from fill propagates unchanged, too.
  EXPECT_EQ(error_of([&] { write_directory_atomic(dir, [](const std::string&) { fail("[test] boom"); }); }),
            "[test] boom");
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "good");
  EXPECT_EQ(listing(root_), std::vector<std::string>{"ckpt"});
  // A parent that does not exist is an error naming the directory.
  const std::string orphan = root_ + "/nope/ckpt";
  const std::string msg = error_of([&] { write_directory_atomic(orphan, [](const std::string&) {}); });
  EXPECT_NE(msg.find(orphan), std::string::npos) << msg;
}

TEST_F(AtomicFile, RecoverAfterCrashBetweenTheRenames) {
  // State after `dir` -> `dir.old` and before the temporary -> `dir`: only the old copy exists.
  const std::string dir = root_ + "/ckpt";
  fs::create_directory(dir + ".old");
  write_plain(dir + ".old/model.bin", "previous");
  fs::create_directory(dir + ".tmp-999999");  // the dead writer's complete temporary
  write_plain(dir + ".tmp-999999/model.bin", "next");
  recover_directory(dir);
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "previous");
  EXPECT_FALSE(fs::exists(dir + ".old"));
  recover_directory(dir);  // idempotent
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "previous");
}

TEST_F(AtomicFile, RecoverAfterCrashBeforeTheOldCopyWasRemoved) {
  // State after both renames, before `dir.old` was (fully) removed: the new copy wins.
  const std::string dir = root_ + "/ckpt";
  fs::create_directory(dir);
  write_plain(dir + "/model.bin", "new");
  fs::create_directory(dir + ".old");
  write_plain(dir + ".old/model.bin", "old");
  recover_directory(dir);
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "new");
  EXPECT_FALSE(fs::exists(dir + ".old"));
  // Nothing to recover: a no-op, also for a directory that does not exist.
  recover_directory(dir);
  recover_directory(root_ + "/never");
  EXPECT_EQ(listing(root_), std::vector<std::string>{"ckpt"});
}

TEST_F(AtomicFile, WriteDirectoryRecoversFirst) {
  const std::string dir = root_ + "/ckpt";
  fs::create_directory(dir + ".old");
  write_plain(dir + ".old/model.bin", "previous");
  write_directory_atomic(dir, [&](const std::string& tmp) {
    // The interrupted write was undone before fill runs.
    EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "previous");
    write_file_atomic(tmp + "/model.bin", "next");
  });
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "next");
  EXPECT_EQ(listing(root_), std::vector<std::string>{"ckpt"});
}

// A writer that died mid-write left its temporary, which recovery does not touch; the next write removes it, but
// not the temporary of a writer that still runs.
TEST_F(AtomicFile, WriteDirectoryRemovesTheTemporariesOfDeadWriters) {
  const std::string dir = root_ + "/ckpt";
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  ASSERT_GT(child, 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);  // a pid that no longer runs
  const std::string dead = "ckpt.tmp-" + std::string(host) + "-" + std::to_string(child);
  const std::string alive = "ckpt.tmp-" + std::string(host) + "-" + std::to_string(::getppid());
  for (const std::string& t : {dead, alive}) {
    fs::create_directory(root_ + "/" + t);
    write_plain(root_ + "/" + t + "/model.bin", "partial");
  }
  write_directory_atomic(dir, [&](const std::string& tmp) { write_file_atomic(tmp + "/model.bin", "next"); });
  EXPECT_EQ(read_file_bytes(dir + "/model.bin"), "next");
  EXPECT_EQ(listing(root_), (std::vector<std::string>{"ckpt", alive}));
}

// A pid that no longer runs: a child that has exited and been waited for.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

// A kill while a token file was written left its temporary (the whole corpus's size) for ever.
TEST_F(AtomicFile, WriteFileRemovesTheTemporariesOfDeadWriters) {
  char host[256] = {};
  ASSERT_EQ(::gethostname(host, sizeof host - 1), 0);
  const std::string dead = "tokens.bin.tmp-" + std::string(host) + "-" + std::to_string(dead_pid()) + "-0";
  const std::string alive = "tokens.bin.tmp-" + std::string(host) + "-" + std::to_string(::getppid()) + "-3";
  const std::string other = "other.bin.tmp-" + std::string(host) + "-" + std::to_string(dead_pid()) + "-0";
  for (const std::string& t : {dead, alive, other}) write_plain(root_ + "/" + t, "partial");
  write_file_atomic(root_ + "/tokens.bin", "ids");
  EXPECT_EQ(read_file_bytes(root_ + "/tokens.bin"), "ids");
  EXPECT_EQ(listing(root_), (std::vector<std::string>{other, "tokens.bin", alive}));
}

// Inputs are regular files: a FIFO blocked the reader for ever, /dev/zero filled the memory, and a dangling link
// read as a file that is missing.
TEST_F(AtomicFile, OnlyRegularFilesAreReadAndTheErrorSaysWhatThePathIs) {
  const std::string fifo = root_ + "/fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const pid_t child = ::fork();  // a read that blocks is killed by the alarm instead of hanging the tests
  if (child == 0) {
    ::alarm(10);
    const std::string msg = error_of([&] { read_file_bytes(fifo); });
    ::_exit(msg.find("cannot read '" + fifo + "': it is a FIFO (named pipe), not a regular file") == std::string::npos);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_NE(error_of([&] { read_file_bytes("/dev/zero"); }).find("'/dev/zero': it is a character device, not a "
                                                                 "regular file"),
            std::string::npos);
  fs::create_symlink(root_ + "/gone", root_ + "/dangling");
  EXPECT_NE(error_of([&] { read_file_bytes(root_ + "/dangling"); })
                .find("'" + root_ + "/dangling': it is a symbolic link to the missing '" + root_ + "/gone'"),
            std::string::npos);
  fs::create_symlink(root_ + "/loop", root_ + "/loop");
  EXPECT_NE(error_of([&] { read_file_bytes(root_ + "/loop"); }).find("it is a loop of symbolic links"),
            std::string::npos);
  EXPECT_EQ(not_a_regular_file(root_ + "/fifo"), "it is a FIFO (named pipe), not a regular file");
  write_plain(root_ + "/f.txt", "0123456789");
  EXPECT_EQ(not_a_regular_file(root_ + "/f.txt"), "");
  EXPECT_EQ(read_file_bytes(root_ + "/f.txt", 4), "0123");
  EXPECT_EQ(read_file_bytes(root_ + "/f.txt", 100), "0123456789");
}

}  // namespace
}  // namespace uoe
