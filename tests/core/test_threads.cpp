// Tests for core/threads.h: the idle-core count sees busy cores, and set_cpu_threads sets, defaults and refuses.
#include "core/threads.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "gradcheck.h"

namespace {

// Restores OpenMP's thread count and OMP_NUM_THREADS as the test found them.
class Threads : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_threads_ = omp_get_max_threads();
    const char* env = std::getenv("OMP_NUM_THREADS");
    had_env_ = env != nullptr;
    if (had_env_) saved_env_ = env;
  }
  void TearDown() override {
    omp_set_num_threads(saved_threads_);
    if (had_env_) {
      setenv("OMP_NUM_THREADS", saved_env_.c_str(), 1);
    } else {
      unsetenv("OMP_NUM_THREADS");
    }
  }

 private:
  int saved_threads_ = 1;
  bool had_env_ = false;
  std::string saved_env_;
};

TEST_F(Threads, IdleCoresIsBetweenOneAndTheCores) {
  const int idle = uoe::idle_cores();
  EXPECT_GE(idle, 1);
  EXPECT_LE(idle, omp_get_num_procs());
}

TEST_F(Threads, CoresKeptBusyAreNotIdle) {
  // One spinning thread per core of the process: none is idle, so the count is its floor, 1.
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int i = 0; i < omp_get_num_procs(); ++i) {
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  }
  const int idle = uoe::idle_cores();
  stop = true;
  for (std::thread& t : spinners) t.join();
  EXPECT_EQ(idle, 1);
}

TEST_F(Threads, AnExplicitCountIsUsedAsGiven) {
  EXPECT_EQ(uoe::set_cpu_threads(3), 3);
  EXPECT_EQ(omp_get_max_threads(), 3);
  EXPECT_EQ(uoe::set_cpu_threads(1), 1);
  EXPECT_EQ(omp_get_max_threads(), 1);
}

TEST_F(Threads, TheDefaultKeepsOmpNumThreads) {
  setenv("OMP_NUM_THREADS", "2", 1);
  omp_set_num_threads(5);  // what OpenMP made of the variable at start-up, here
  EXPECT_EQ(uoe::set_cpu_threads(0), 5);
  EXPECT_EQ(omp_get_max_threads(), 5);
}

TEST_F(Threads, TheDefaultWithoutOmpNumThreadsIsTheIdleCores) {
  unsetenv("OMP_NUM_THREADS");
  const int chosen = uoe::set_cpu_threads(0);
  EXPECT_GE(chosen, 1);
  EXPECT_LE(chosen, omp_get_num_procs());
  EXPECT_EQ(omp_get_max_threads(), chosen);
}

TEST_F(Threads, ANegativeCountIsRefused) {
  uoe::testing::expect_error([] { uoe::set_cpu_threads(-1); }, {"set_cpu_threads", ">= 0", "-1"});
}

}  // namespace
