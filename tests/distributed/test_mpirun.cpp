// `mpirun -np 2` end to end: `uoe train` data parallel (with ZeRO-1) follows the one-process run with the same
// batch and resumes at one rank; a rank that fails mid-step ends every rank with its error instead of a hang, and
// one that stops answering is ended by the collective watchdog of the others; ranks started with different
// settings all stop at once, naming them.
// Skipped when the build has no MPI (or is a sanitizer build).
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <fstream>

#include "core/json.h"
#include "fixtures.h"

namespace uoe {
namespace {

using test::run_command;

#ifdef UOE_MPIEXEC
constexpr const char* kMpiexec = UOE_MPIEXEC;
constexpr const char* kDistTests = UOE_DIST_TESTS_PATH;
#else
constexpr const char* kMpiexec = nullptr;
constexpr const char* kDistTests = nullptr;
#endif

#define SKIP_WITHOUT_MPI() \
  if (!kMpiexec) GTEST_SKIP() << "no MPI in this build (or a sanitizer build)"

std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  std::ifstream in(out + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) v.push_back(json::parse(line).at("train_loss").as_double());
  return v;
}

TEST(MpiRun, TrainDataParallelFollowsOneProcessAndResumesAtOneRank) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir("mpirun_train");
  test::micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(test::micro_config(nn::FfnKind::UoE)).dump(2);
  const std::string train = std::string(UOE_CLI_PATH) + " train --config " + dir + "/micro.json --data " + dir +
                            "/text.txt --batch 4 --seq 32 --lr 3e-3 --min-lr 3e-3 --warmup 0 --eval-every 0 " +
                            "--eval-batches 2 --threads 1 --quiet --out ";
  int code = 0;
  std::string out = run_command(train + dir + "/one --steps 6", &code);
  ASSERT_EQ(code, 0) << out;
  out = run_command(std::string("timeout 300 ") + kMpiexec + " " + train + dir + "/two --steps 4 --zero1", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("x 2 ranks (ZeRO-1)"), std::string::npos) << out;
  size_t headers = 0;  // rank 0 alone prints
  for (size_t at = out.find("uoe train:"); at != std::string::npos; at = out.find("uoe train:", at + 1)) ++headers;
  EXPECT_EQ(headers, 1u) << out;
  // the ZeRO-1 checkpoint of 2 ranks, at 1 (a constant learning rate: the schedule does not depend on --steps)
  out = run_command(train + dir + "/two --steps 6 --resume --allow-change steps", &code);
  ASSERT_EQ(code, 0) << out;
  const std::vector<double> want = losses(dir + "/one"), got = losses(dir + "/two");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 2e-5 * want[i]) << "step " << i + 1;
}

// `mpirun -np 2` where rank 1 alone gets `rank1_flags` after the common command line; returns the output and
// sets *code and *seconds.
std::string run_with_rank1_flags(const std::string& command, const std::string& rank1_flags, int* code,
                                 double* seconds) {
  const auto start = std::chrono::steady_clock::now();
  const std::string script = "if [ \"$OMPI_COMM_WORLD_RANK\" = 1 ]; then exec " + command + " " + rank1_flags +
                             "; else exec " + command + "; fi";
  const std::string out = run_command(std::string("timeout 120 ") + kMpiexec + " sh -c '" + script + "'", code);
  *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return out;
}

// Before run identities: another --config crashed in MPI_Bcast, another --steps or --zero1 hung until the
// collective timeout, another --lr, --seed, --batch or --data trained without a word.
TEST(MpiRun, RanksStartedWithDifferentSettingsAllStopNamingThem) {
  SKIP_WITHOUT_MPI();
  const std::string dir = test::temp_dir("mpirun_identity");
  test::micro_data(dir);
  nn::ModelConfig config = test::micro_config(nn::FfnKind::UoE);
  std::ofstream(dir + "/micro.json") << to_json(config).dump(2);
  config.n_layers = 3;
  std::ofstream(dir + "/deeper.json") << to_json(config).dump(2);
  std::ofstream(dir + "/other.txt") << std::ifstream(dir + "/text.txt").rdbuf() << "one more line\n";
  const std::string train = std::string(UOE_CLI_PATH) + " train --config " + dir + "/micro.json --data " + dir +
                            "/text.txt --batch 4 --seq 32 --steps 2 --eval-every 0 --eval-batches 1 --threads 1 " +
                            "--quiet --out " + dir + "/run";
  const std::string refused = "[train] the 2 ranks were not started with the same run: rank 1 differs in ";
  int code = 0;
  double seconds = 0;
  // one setting: --steps (a hang until the collective timeout before)
  std::string out = run_with_rank1_flags(train + "1", "--steps 3", &code, &seconds);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, 124) << "the ranks hung until the timeout\n" << out;
  EXPECT_LT(seconds, 10) << out;
  for (const char* rank : {"rank 0 of 2: ", "rank 1 of 2: "})
    EXPECT_NE(out.find(rank + refused + "--steps (3 there, 2 on rank 0). Start every rank with the same options"),
              std::string::npos) << out;
  // every other setting of the issue at once: each one named, with both values
  out = run_with_rank1_flags(train + "2",
                             "--config " + dir + "/deeper.json --batch 2 --lr 2e-3 --seed 1 --data " + dir +
                                 "/other.txt --zero1",
                             &code, &seconds);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, 124) << "the ranks hung until the timeout\n" << out;
  EXPECT_LT(seconds, 10) << out;
  for (const char* rank : {"rank 0 of 2: ", "rank 1 of 2: "})
    EXPECT_NE(out.find(rank + refused + "model.n_layers (3 there, 2 on rank 0), data.bytes ("), std::string::npos)
        << out;
  for (const char* field : {"data.hash (", "--seed (1 there, 0 on rank 0)", "--batch (2 there, 4 on rank 0)",
                            "--lr (0.002 there, 0.001 on rank 0)", "--zero1 (true there, false on rank 0)"})
    EXPECT_NE(out.find(field), std::string::npos) << field << "\n" << out;
}

TEST(MpiRun, ARankThatFailsMidStepEndsEveryRank) {
  SKIP_WITHOUT_MPI();
  int code = 0;
  const std::string out =
      run_command(std::string("timeout 120 ") + kMpiexec + " " + kDistTests + " --fail-on-rank=1", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, 124) << "the ranks hung until the timeout\n" << out;
  EXPECT_NE(out.find("uoe_dist_tests: rank 1 of 2: injected failure in the backward of step 1"), std::string::npos)
      << out;
}

TEST(MpiRun, ARankThatStopsAnsweringEndsTheRunAfterTheTimeout) {
  SKIP_WITHOUT_MPI();
  int code = 0;
  const auto start = std::chrono::steady_clock::now();
  const std::string out =
      run_command(std::string("timeout 120 ") + kMpiexec + " " + kDistTests + " --stall-on-rank=1", &code);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, 124) << "the ranks hung until the timeout\n" << out;
  EXPECT_LT(seconds, 55) << "the run ended only when the stalled rank woke up\n" << out;
  EXPECT_NE(out.find("rank 0 of 2: MPI_Wait has not completed after"), std::string::npos) << out;
  EXPECT_NE(out.find("(collective timeout 2 s): another rank stopped answering"), std::string::npos) << out;
}

}  // namespace
}  // namespace uoe
