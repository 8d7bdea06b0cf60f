// The collective watchdog ends a process whose collective waits past the timeout, with a message naming it, and
// lets a Paused stretch wait as long as it takes. Each case runs in a forked child, since expiry ends the process.
#include "core/collective_watchdog.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace uoe {
namespace {

// The exit status of a child that runs `body` then exits 0.
int exit_status_of(const std::function<void()>& body) {
  const pid_t child = ::fork();
  if (child == 0) {
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void wait_in_a_collective(double seconds) {
  const watchdog::Blocking blocked("[all_reduce] rank 0 of 2: MPI_Wait");
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
}

TEST(CollectiveWatchdog, AWaitPastTheTimeoutEndsTheProcess) {
  ::testing::internal::CaptureStderr();
  const int status = exit_status_of([] {
    watchdog::set_timeout(0.5);
    wait_in_a_collective(3);
  });
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, 1);
  EXPECT_NE(err.find("[all_reduce] rank 0 of 2: MPI_Wait has not completed after"), std::string::npos) << err;
}

TEST(CollectiveWatchdog, PausedWaitsAndShortWaitsPass) {
  EXPECT_EQ(exit_status_of([] {
              watchdog::set_timeout(0.5);
              wait_in_a_collective(0.1);
              {
                const watchdog::Paused paused;
                wait_in_a_collective(1.5);
              }
              wait_in_a_collective(0.1);  // counted from the end of the pause, not from the start of the run
            }),
            0);
  EXPECT_THROW(watchdog::set_timeout(-1), std::exception);
}

}  // namespace
}  // namespace uoe
