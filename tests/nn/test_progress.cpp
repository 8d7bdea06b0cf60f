// The trainer's console output: a bar redrawn in place on a terminal, rate-limited lines in a log, and validation
// lines that stay in both.
#include "nn/progress.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <string>

namespace uoe::nn {
namespace {

// Everything written to `f` so far.
std::string contents(std::FILE* f) {
  std::fflush(f);
  std::rewind(f);
  std::string s;
  for (int c; (c = std::fgetc(f)) != EOF;) s += char(c);
  return s;
}

TEST(Progress, LogLinesAreRateLimitedAndValidationAlwaysShows) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(f, /*terminal=*/false, /*log_interval_s=*/30);
  const double at[] = {0.5, 10, 31, 40, 45, 62};  // elapsed seconds after steps 1..6 of 7
  for (int i = 0; i < 6; ++i) p.step(i + 1, 7, 3.0 - 0.1 * i, 1000, 60, at[i]);
  p.validation(6, 7, 2.5, 2.75, 62);
  p.step(7, 7, 2.4, 1000, 0, 63);  // the last step always gets a line
  p.finish();
  const std::string text = contents(f);
  std::fclose(f);
  EXPECT_EQ(text,
            "step 1/7 | loss 3.0000 | 1000 tok/s | elapsed 0:01 | ETA 1:00\n"
            "step 3/7 | loss 2.8000 | 1000 tok/s | elapsed 0:31 | ETA 1:00\n"
            "step 6/7 | loss 2.5000 | 1000 tok/s | elapsed 1:02 | ETA 1:00\n"
            "step 6/7 | train loss 2.5000 | val loss 2.7500 | elapsed 1:02\n"
            "step 7/7 | loss 2.4000 | 1000 tok/s | elapsed 1:03 | ETA 0:00\n");
}

TEST(Progress, TerminalBarIsRedrawnAndValidationTakesItsPlace) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(f, /*terminal=*/true);
  p.step(1, 4, 3.0, 500, 3725, 1);
  p.step(2, 4, 2.9, 500, 3600, 2);
  p.validation(2, 4, 2.9, 3.1, 2);
  p.step(3, 4, 2.8, 500, 10, 3);
  p.finish();
  const std::string text = contents(f);
  std::fclose(f);
  const std::string bar1 = "\r[######..................] step 1/4 | loss 3.0000 | 500 tok/s | ETA 1:02:05   ";
  const std::string bar2 = "\r[############............] step 2/4 | loss 2.9000 | 500 tok/s | ETA 1:00:00   ";
  const std::string val = "step 2/4 | train loss 2.9000 | val loss 3.1000 | elapsed 0:02";
  const std::string bar3 = "\r[##################......] step 3/4 | loss 2.8000 | 500 tok/s | ETA 0:10   ";
  // The validation line is padded over the whole bar, so no stale characters remain on screen.
  const std::string padded = "\r" + val + std::string(bar2.size() - 1 - val.size(), ' ') + "\n";
  EXPECT_EQ(text, bar1 + bar2 + padded + bar3 + "\n");
}

TEST(Progress, TheBarFollowsTheFractionGivenAndATimeLimitEndsTheLog) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress bar(f, /*terminal=*/true);
  bar.step(5, 1000, 2.0, 100, 0, 30, /*fraction=*/1.0);  // --minutes ended the run at step 5 of 1000
  bar.finish();
  EXPECT_EQ(contents(f), "\r[########################] step 5/1000 | loss 2.0000 | 100 tok/s | ETA 0:00   \n");
  std::fclose(f);
  f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress log(f, /*terminal=*/false, /*log_interval_s=*/30);
  log.step(1, 1000, 3.0, 100, 9, 1, 0.1);
  log.step(5, 1000, 2.0, 100, 0, 10, 1.0);  // within the interval, but the run's last line
  EXPECT_EQ(contents(f), "step 1/1000 | loss 3.0000 | 100 tok/s | elapsed 0:01 | ETA 0:09\n"
                         "step 5/1000 | loss 2.0000 | 100 tok/s | elapsed 0:10 | ETA 0:00\n");
  std::fclose(f);
}

TEST(Progress, ATaskShowsItsCountDetailAndEta) {
  std::FILE* f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress p(f, /*terminal=*/true);
  p.task("batch", 0, 4, 0);
  p.task("batch", 1, 4, 10, "moe seed 0");
  p.finish();
  EXPECT_EQ(contents(f), "\r[........................] batch 0/4 | elapsed 0:00 | ETA ?   "
                         "\r[######..................] batch 1/4 | moe seed 0 | elapsed 0:10 | ETA 0:30   \n");
  std::fclose(f);
  f = std::tmpfile();
  ASSERT_NE(f, nullptr);
  Progress log(f, /*terminal=*/false, /*log_interval_s=*/30);
  for (int done = 1; done <= 4; ++done) log.task("window", done, 4, double(done));
  EXPECT_EQ(contents(f), "window 1/4 | elapsed 0:01 | ETA 0:03\nwindow 4/4 | elapsed 0:04 | ETA 0:00\n");
  std::fclose(f);
}

}  // namespace
}  // namespace uoe::nn
