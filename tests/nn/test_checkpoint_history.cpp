// Checkpoint history (keep_checkpoints, `uoe train --keep-checkpoints`): the last N saves kept as checkpoint-<step>
// beside the latest; a save that fails or is killed part-way never loses the checkpoints before it; a resume from an
// older save drops the history of the steps it redoes and continues bit-exactly; eval reads a history checkpoint.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "fixtures.h"
#include "nn/checkpoint.h"
#include "nn/checkpoint_history.h"
#include "nn/trainer.h"
#include "nn/trainer_state.h"

namespace uoe::nn {
namespace {

namespace fs = std::filesystem;
using test::metric_lines;

std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  for (const json::Value& line : metric_lines(out)) v.push_back(line.at("train_loss").as_double());
  return v;
}

// Every history checkpoint loads whole and holds the step its name says.
void expect_history_whole(const std::string& ckpt) {
  for (const int64_t step : checkpoint_history(ckpt)) {
    const std::string dir = history_dir(ckpt, step);
    ASSERT_TRUE(checkpoint_exists(dir)) << dir;
    EXPECT_EQ(trainer_state_from_json(load_checkpoint(dir).trainer_state, dir).step, step) << dir;
  }
}

ino_t inode(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::stat(path.c_str(), &st), 0) << path;
  return st.st_ino;
}

TEST(CheckpointHistory, TheLastNSavesAreKeptBesideTheLatestAndAResumeFromAnOlderOneIsBitExact) {
  const std::string dir = test::temp_dir("ckpt_history");
  auto data = test::micro_data(dir);
  auto tok = make_byte_tokenizer();
  const std::string out = dir + "/run", ckpt = out + "/checkpoint";
  TrainOptions o = test::micro_train_options(out, 12);
  o.save_every = 2;
  o.keep_checkpoints = 3;
  train(test::micro_config(FfnKind::UoE), o, *data, *tok);
  EXPECT_EQ(checkpoint_history(ckpt), (std::vector<int64_t>{8, 10, 12}));
  expect_history_whole(ckpt);
  EXPECT_EQ(read_trainer_state(ckpt).step, 12);
  // The latest save and its history copy share their files (hard links), never written in place.
  EXPECT_EQ(inode(ckpt + "/model.safetensors"), inode(history_dir(ckpt, 12) + "/model.safetensors"));
  const std::vector<double> straight = losses(out);

  // Back to step 8: the saves after it belong to the steps being redone and go; the resumed run is the same run.
  fs::remove_all(ckpt);
  fs::copy(history_dir(ckpt, 8), ckpt);
  o.resume = true;
  o.keep_checkpoints = 2;
  ::testing::internal::CaptureStderr();
  train(test::micro_config(FfnKind::UoE), o, *data, *tok);
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("removed 2 saved checkpoints of the steps being redone (" + ckpt + "-10 to " + ckpt + "-12)"),
            std::string::npos) << err;
  EXPECT_EQ(losses(out), straight);
  EXPECT_EQ(checkpoint_history(ckpt), (std::vector<int64_t>{10, 12}));
  expect_history_whole(ckpt);

  // A new run in the same place replaces the old run's saves with its metrics.
  o.resume = false;
  o.keep_checkpoints = 0;
  o.steps = 3;
  ::testing::internal::CaptureStderr();
  train(test::micro_config(FfnKind::UoE), o, *data, *tok);
  const std::string replaced = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(replaced.find("removed 2 saved checkpoints of the run this one replaces"), std::string::npos) << replaced;
  EXPECT_TRUE(checkpoint_history(ckpt).empty());
}

TEST(CheckpointHistory, OnlyExactStepNamesAreHistoryAndLeftoversOfARemovalGo) {
  const std::string dir = test::temp_dir("ckpt_history_names"), ckpt = dir + "/checkpoint";
  for (const char* name : {"checkpoint-3", "checkpoint-10", "checkpoint-x", "checkpoint-7.old", "checkpoint-",
                           "checkpoint-4.tmp-host-1", "other-5", "checkpoint-9.pruned"})
    fs::create_directories(dir + "/" + name);
  std::ofstream(dir + "/checkpoint-8") << "a file";
  EXPECT_EQ(checkpoint_history(ckpt), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(checkpoint_history(ckpt + "/"), (std::vector<int64_t>{3, 10}));
  EXPECT_EQ(history_dir(ckpt + "/", 12), ckpt + "-12");
  EXPECT_EQ(drop_checkpoint_history_after(ckpt, 5), (std::vector<int64_t>{10}));
  EXPECT_FALSE(fs::exists(dir + "/checkpoint-10"));
  // Keeping one: the new save stays, the older goes, so does the leftover of an interrupted removal.
  fs::create_directories(ckpt);
  std::ofstream(ckpt + "/model.safetensors") << "weights";
  keep_checkpoint_history(ckpt, 12, 1);
  EXPECT_EQ(checkpoint_history(ckpt), (std::vector<int64_t>{12}));
  EXPECT_FALSE(fs::exists(dir + "/checkpoint-9.pruned"));
  EXPECT_TRUE(fs::exists(dir + "/checkpoint-7.old"));  // not ours: an interrupted write's, for its own recovery
  std::ifstream in(ckpt + "-12/model.safetensors");
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "weights");
  EXPECT_THROW(keep_checkpoint_history(dir + "/missing", 1, 1), std::exception);
  EXPECT_FALSE(fs::exists(dir + "/missing-1"));
}

// A save that fails part-way (a full disk: the file size limit, in a child) leaves the latest checkpoint and every
// history checkpoint before it whole, and prunes nothing.
TEST(CheckpointHistory, ASaveThatFailsPartWayKeepsEveryEarlierCheckpoint) {
  const std::string dir = test::temp_dir("ckpt_history_fail"), ckpt = dir + "/checkpoint";
  const ModelConfig config = test::micro_config(FfnKind::MoE);
  LanguageModel model(config);
  auto tok = make_byte_tokenizer();
  const auto save = [&](int64_t step) {
    TrainerState s;
    s.step = step;
    save_checkpoint(ckpt, model, config, nullptr, to_json(s), *tok);
    keep_checkpoint_history(ckpt, step, 2);
  };
  save(1);
  save(2);
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead of killing the process
    const rlimit limit{fs::file_size(ckpt + "/model.safetensors") / 2, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    try {
      save(3);
    } catch (const Error&) {
      ::_exit(0);
    }
    ::_exit(1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
  EXPECT_EQ(read_trainer_state(ckpt).step, 2);
  EXPECT_EQ(checkpoint_history(ckpt), (std::vector<int64_t>{1, 2}));
  expect_history_whole(ckpt);
}

// `uoe train` with a save every step, killed at several moments (mid-save among them): the latest checkpoint and
// every history checkpoint load whole, the history ends at the latest save or the one before it, and the resumed
// run finishes bit-exactly as the uninterrupted one, with the last N saves.
TEST(CheckpointHistory, AKillAtAnyMomentLosesNoCheckpointAndTheResumeIsBitExact) {
  const std::string dir = test::temp_dir("ckpt_history_kill");
  test::micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(test::micro_config(FfnKind::UoE)).dump(2);
  const auto spawn = [&](const std::string& out, bool resume) {
    std::vector<std::string> args = {UOE_CLI_PATH, "train", "--config", dir + "/micro.json", "--data",
                                     dir + "/text.txt", "--out", out, "--steps", "10", "--batch", "4", "--seq", "32",
                                     "--lr", "3e-3", "--warmup", "2", "--eval-every", "0", "--eval-batches", "1",
                                     "--save-every", "1", "--keep-checkpoints", "3", "--quiet", "--threads", "1"};
    if (resume) args.push_back("--resume");
    const pid_t pid = ::fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      std::freopen("/dev/null", "w", stdout);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    return pid;
  };
  const auto wait_for = [](pid_t pid) {
    int status = 0;
    ::waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  ASSERT_EQ(wait_for(spawn(dir + "/straight", false)), 0);
  const std::vector<double> straight = losses(dir + "/straight");
  for (const int delay_us : {0, 1300, 2900}) {
    const std::string out = dir + "/killed" + std::to_string(delay_us), ckpt = out + "/checkpoint";
    const pid_t child = spawn(out, false);
    for (int i = 0; i < 12000 && checkpoint_history(ckpt).size() < 2; ++i) usleep(2000);
    usleep(useconds_t(delay_us));
    ::kill(child, SIGKILL);
    wait_for(child);
    ASSERT_TRUE(checkpoint_exists(ckpt)) << out;
    const int64_t at = read_trainer_state(ckpt).step;
    const std::vector<int64_t> history = checkpoint_history(ckpt);
    ASSERT_FALSE(history.empty()) << out;
    EXPECT_TRUE(history.back() == at || history.back() == at - 1) << out << ": latest " << at << ", history ends at "
                                                                   << history.back();
    EXPECT_LE(history.size(), 4u) << out;  // the new save is complete before the oldest goes
    expect_history_whole(ckpt);
    ASSERT_EQ(wait_for(spawn(out, true)), 0) << out;
    EXPECT_EQ(losses(out), straight) << out << " resumed at step " << at;
    EXPECT_EQ(checkpoint_history(ckpt), (std::vector<int64_t>{8, 9, 10})) << out;
    expect_history_whole(ckpt);
  }
}

TEST(CheckpointHistory, EvalReadsAHistoryCheckpointAndANewRunRefusesAnOutWithOne) {
  const std::string dir = test::temp_dir("ckpt_history_cli");
  test::micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(test::micro_config(FfnKind::MoE)).dump(2);
  const std::string uoe = "timeout 120 " + std::string(UOE_CLI_PATH), out = dir + "/run";
  const std::string train = uoe + " train --config " + dir + "/micro.json --data " + dir + "/text.txt --out " + out +
                            " --batch 2 --seq 16 --eval-every 0 --eval-batches 1 --quiet --steps 4 --save-every 2";
  int code = 0;
  std::string msg = test::run_command(train + " --keep-checkpoints 5", &code);
  ASSERT_EQ(code, 0) << msg;
  EXPECT_EQ(checkpoint_history(out + "/checkpoint"), (std::vector<int64_t>{2, 4}));
  msg = test::run_command(uoe + " eval --ckpt " + out + "/checkpoint-2 --data " + dir + "/text.txt --seq 16 "
                          "--max-batches 1 --json",
                          &code);
  EXPECT_EQ(code, 0) << msg;
  EXPECT_NE(msg.find("val_loss_nats_per_token"), std::string::npos) << msg;
  // Without its checkpoint and metrics, the saves alone still make a run that a new one must not silently replace.
  fs::remove_all(out + "/checkpoint");
  fs::remove(out + "/metrics.jsonl");
  msg = test::run_command(train, &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("already holds a run (its saved checkpoints " + out + "/checkpoint-2...)"), std::string::npos)
      << msg;
  msg = test::run_command(train + " --overwrite --routing-probe-tokens -1", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("--routing-probe-tokens must be >= 0 (0: no routing probe), got -1"), std::string::npos) << msg;
  msg = test::run_command(train + " --overwrite --keep-checkpoints 1", &code);
  EXPECT_EQ(code, 0) << msg;
  EXPECT_EQ(checkpoint_history(out + "/checkpoint"), (std::vector<int64_t>{4}));
}

}  // namespace
}  // namespace uoe::nn
