// What a run does when things around it fail (issue 18's fault-injection study): a metrics write that fails stops
// the run naming the file, after saving its checkpoint; --resume refuses a checkpoint that cannot be read whole
// instead of starting a new run in its place; FIFOs and devices are refused at once; a checkpoint's config, trainer
// state and weights are checked before anything is built or trained. Every command runs under `timeout`, so a
// hang fails its test.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <tuple>

#include "core/atomic_file.h"
#include "core/safetensors.h"
#include "fixtures.h"
#include "nn/checkpoint.h"
#include "nn/metrics_log.h"
#include "nn/trainer_state.h"

namespace uoe::nn {
namespace {

namespace fs = std::filesystem;
using test::metric_lines;
using test::run_command;

class RunFailures : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::temp_dir("run_failures");
    test::micro_data(dir);
    std::ofstream(dir + "/micro.json") << to_json(test::micro_config(FfnKind::MoE)).dump(2);
  }
  // `uoe <args>`, killed after 60 s (exit 124) should it hang.
  std::string uoe(const std::string& args, int* code) const {
    return run_command("timeout 60 " + std::string(UOE_CLI_PATH) + " " + args, code);
  }
  std::string train(const std::string& flags, int* code) const {
    return uoe("train --config " + dir + "/micro.json --data " + dir + "/text.txt --batch 2 --seq 16 --eval-every 0 "
               "--eval-batches 1 --quiet " + flags, code);
  }
  // A run of `steps` steps in dir/<name>; returns its directory.
  std::string run(const std::string& name, int steps) const {
    int code = 0;
    const std::string out = train("--out " + dir + "/" + name + " --steps " + std::to_string(steps), &code);
    EXPECT_EQ(code, 0) << out;
    return dir + "/" + name;
  }
  std::string dir;
};

TEST_F(RunFailures, AMetricsWriteThatFailsStopsTheRunAfterSavingItsCheckpoint) {
  // /dev/full fails every write with ENOSPC: the run used to say "done at step 3" and exit 0.
  const std::string out = dir + "/full";
  fs::create_directories(out);
  fs::create_symlink("/dev/full", out + "/metrics.jsonl");
  int code = 0;
  std::string msg = train("--out " + out + " --steps 3", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("uoe train: [train] cannot write '" + out + "/metrics.jsonl': No space left on device (the line "
                     "of step 1); the run stopped at step 1 after saving its checkpoint: make room (or repair the file), then resume the run"),
            std::string::npos) << msg;
  EXPECT_EQ(msg.find("done at step"), std::string::npos) << msg;
  EXPECT_EQ(read_trainer_state(out + "/checkpoint").step, 1);
  // Once the file is writable again the run resumes from that checkpoint.
  fs::remove(out + "/metrics.jsonl");
  msg = train("--out " + out + " --steps 3 --resume", &code);
  ASSERT_EQ(code, 0) << msg;
  const std::vector<json::Value> lines = metric_lines(out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].at("step").as_int(), 2);
}

// A write cut short by the file size limit (a full disk writes part of a line, then fails): the partial line is cut
// off again, so the file holds whole lines, and the error names the file. In a child, which the limit concerns.
TEST(MetricsLogFile, AWriteThatFailsHalfWayLeavesOnlyWholeLines) {
  const std::string dir = test::temp_dir("metrics_log_partial"), path = dir + "/metrics.jsonl";
  const pid_t child = ::fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG instead of killing the process
    MetricsLog log = MetricsLog::fresh(path);
    json::Value line = json::Value::object();
    line["step"] = 1;
    log.append(line);
    const rlimit limit{fs::file_size(path) + 10, RLIM_INFINITY};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    line["step"] = 2;
    line["padding"] = std::string(100, 'x');
    std::string msg;
    try {
      log.append(line);
    } catch (const Error& e) {
      msg = e.what();
    }
    const bool named = msg.find("[train] cannot write '" + path + "': File too large (the line of step 2)") !=
                       std::string::npos;
    ::_exit(named && read_file_bytes(path) == "{\"step\":1}\n" ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status;
}

TEST_F(RunFailures, ResumeRefusesACheckpointThatCannotBeReadWhole) {
  const std::string base = run("base", 2);
  const std::vector<std::pair<std::string, std::function<void(const std::string&)>>> damages = {
      {"model.safetensors: No such file or directory", [](const std::string& c) { fs::remove(c + "/model.safetensors"); }},
      {"model.safetensors: it is a symbolic link to the missing '/nonexistent/model.safetensors'",
       [](const std::string& c) {
         fs::remove(c + "/model.safetensors");
         fs::create_symlink("/nonexistent/model.safetensors", c + "/model.safetensors");
       }},
      {"model.safetensors: it is a loop of symbolic links (Too many levels of symbolic links)",
       [](const std::string& c) {
         fs::remove(c + "/model.safetensors");
         fs::create_symlink(c + "/model.safetensors", c + "/model.safetensors");
       }},
      {"config.json: it is a FIFO (named pipe), not a regular file",
       [](const std::string& c) {
         fs::remove(c + "/config.json");
         ASSERT_EQ(::mkfifo((c + "/config.json").c_str(), 0600), 0);
       }},
      {"optimizer.safetensors: No such file or directory",
       [](const std::string& c) { fs::remove(c + "/optimizer.safetensors"); }},
  };
  int n = 0;
  for (const auto& [expected, spoil] : damages) {
    const std::string out = dir + "/damaged" + std::to_string(n++), ckpt = out + "/checkpoint";
    fs::copy(base, out, fs::copy_options::recursive);
    spoil(ckpt);
    int code = 0;
    const std::string msg = train("--out " + out + " --steps 4 --resume", &code);
    EXPECT_EQ(code, 1) << msg;
    EXPECT_NE(msg.find("uoe train: [checkpoint] the checkpoint in '" + ckpt + "' cannot be read whole: " + expected +
                       ". Restore the files from a copy of the run; or start the run afresh (uoe train --overwrite, "
                       "or another --out)"),
              std::string::npos) << msg;
    EXPECT_EQ(msg.find("starting at step 0"), std::string::npos) << msg;
    EXPECT_EQ(metric_lines(out).size(), 2u) << "the run's metrics are kept";
    EXPECT_EQ(read_trainer_state(ckpt).step, 2) << "the checkpoint is not replaced";
  }
  // A copy of the checkpoint before it is there: the error says how to go back to it, and recovery keeps it.
  const std::string out = dir + "/with_old", ckpt = out + "/checkpoint";
  fs::copy(base, out, fs::copy_options::recursive);
  fs::copy(ckpt, ckpt + ".old", fs::copy_options::recursive);
  fs::remove(ckpt + "/model.safetensors");
  int code = 0;
  std::string msg = train("--out " + out + " --steps 4 --resume", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("cannot be read whole: model.safetensors: No such file or directory. '" + ckpt + ".old' holds "
                     "the checkpoint before it: to go back to that one, replace '" + ckpt + "' with it (rm -r " + ckpt +
                     " && mv " + ckpt + ".old " + ckpt + ")"),
            std::string::npos) << msg;
  EXPECT_TRUE(fs::exists(ckpt + ".old/model.safetensors"));
  // eval says the same of it; a new run without --overwrite names the damage too.
  msg = uoe("eval --ckpt " + ckpt + " --data " + dir + "/text.txt", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("cannot be read whole: model.safetensors: No such file or directory"), std::string::npos) << msg;
  msg = train("--out " + out + " --steps 4", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("already holds a run (a checkpoint that cannot be read whole"), std::string::npos) << msg;
}

TEST_F(RunFailures, FifosAndDevicesAreRefusedAtOnce) {
  const std::string ckpt = run("run", 1) + "/checkpoint", fifo = dir + "/fifo.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const std::string text = " --data " + dir + "/text.txt";
  for (const auto& [command, expected] : std::vector<std::pair<std::string, std::string>>{
           {"train --data " + fifo + " --out " + dir + "/a", "cannot read '" + fifo + "': it is a FIFO (named pipe)"},
           {"train --data /dev/zero --out " + dir + "/b", "cannot read '/dev/zero': it is a character device, not a "
                                                          "regular file"},
           {"train --config " + fifo + text + " --out " + dir + "/c", "cannot read '" + fifo + "': it is a FIFO"},
           {"eval --ckpt " + ckpt + " --data " + fifo, "cannot read '" + fifo + "': it is a FIFO"},
           {"analyze --ckpt " + ckpt + " --data /dev/zero --out " + dir + "/an", "'/dev/zero': it is a character "
                                                                                 "device"},
       }) {
    int code = 0;
    const std::string msg = uoe(command, &code);
    EXPECT_EQ(code, 1) << command << "\n" << msg;
    EXPECT_NE(msg.find(expected), std::string::npos) << command << "\n" << msg;
  }
  fs::remove(ckpt + "/model.safetensors");
  ASSERT_EQ(::mkfifo((ckpt + "/model.safetensors").c_str(), 0600), 0);
  int code = 0;
  const std::string msg = uoe("sample --ckpt " + ckpt + " --tokens 2", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("model.safetensors: it is a FIFO (named pipe), not a regular file"), std::string::npos) << msg;
}

// Rewrites one field of a checkpoint's JSON file.
void set_field(const std::string& file, const std::string& key, const json::Value& value) {
  json::Value v = json::read_file(file);
  v[key] = value;
  write_file_atomic(file, v.dump(2));
}

TEST_F(RunFailures, ACheckpointsConfigTrainerStateAndWeightsAreChecked) {
  const std::string base = run("base", 1);
  int code = 0;
  // 10^9 layers were allocated one after another for minutes.
  std::string out = dir + "/layers", ckpt = out + "/checkpoint";
  fs::copy(base, out, fs::copy_options::recursive);
  set_field(ckpt + "/config.json", "n_layers", int64_t(1000000000));
  for (const std::string& command : {"eval --ckpt " + ckpt + " --data " + dir + "/text.txt",
                                     "sample --ckpt " + ckpt + " --tokens 2"}) {
    const std::string msg = uoe(command, &code);
    EXPECT_EQ(code, 1) << msg;
    EXPECT_NE(msg.find("[config] " + ckpt + "/config.json: n_layers is 1000000000, expected 1 to 1024"),
              std::string::npos) << msg;
  }
  set_field(ckpt + "/config.json", "n_layers", "2");
  std::string msg = uoe("eval --ckpt " + ckpt + " --data " + dir + "/text.txt", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("[config] " + ckpt + "/config.json: [json] key \"n_layers\": expected an integer, got string"),
            std::string::npos) << msg;

  // Counts that cannot be negative: step -1 resumed "at step -1" and dropped the metrics.
  int n = 0;
  for (const auto& [key, value, expected] : std::vector<std::tuple<std::string, json::Value, std::string>>{
           {"step", int64_t(-1), "'step' is -1, expected a count >= 0 (the file is damaged)"},
           {"data_cursor", int64_t(-3), "'data_cursor' is -3, expected a count >= 0"},
           {"tokens_seen", int64_t(-1), "'tokens_seen' is -1, expected a count >= 0"},
           {"step", "1", "the field 'step': [json] expected an integer, got string"},
           {"rng", json::Value::object(), "the field 'rng.seed' is missing"},
       }) {
    out = dir + "/state" + std::to_string(n++);
    ckpt = out + "/checkpoint";
    fs::copy(base, out, fs::copy_options::recursive);
    set_field(ckpt + "/trainer_state.json", key, value);
    msg = train("--out " + out + " --steps 3 --resume", &code);
    EXPECT_EQ(code, 1) << msg;
    EXPECT_NE(msg.find("uoe train: [checkpoint] " + ckpt + "/trainer_state.json: " + expected), std::string::npos)
        << msg;
    EXPECT_EQ(metric_lines(out).size(), 1u);
  }

  // NaN weights: eval printed "val loss nan" and exited 0, a resume said "training diverged, lower --lr".
  out = dir + "/nan";
  ckpt = out + "/checkpoint";
  fs::copy(base, out, fs::copy_options::recursive);
  std::vector<safetensors::Named> tensors = safetensors::load(ckpt + "/model.safetensors").tensors;
  for (auto& t : tensors)
    if (t.name == "final_norm.weight") t.tensor = full({32}, std::nan(""));
  safetensors::save(ckpt + "/model.safetensors", tensors);
  const std::string damaged = "[checkpoint] " + ckpt + "/model.safetensors: the tensor 'final_norm.weight' holds a "
                              "value that is not finite (nan at element 0): the checkpoint is damaged";
  msg = uoe("eval --ckpt " + ckpt + " --data " + dir + "/text.txt", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find(damaged), std::string::npos) << msg;
  msg = train("--out " + out + " --steps 3 --allow-change steps --resume", &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find(damaged), std::string::npos) << msg;
  EXPECT_EQ(msg.find("lower learning rate"), std::string::npos) << msg;
}

}  // namespace
}  // namespace uoe::nn
