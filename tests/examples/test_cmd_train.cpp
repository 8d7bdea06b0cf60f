// uoe train's console: the progress follows --minutes when time ends the run first, a stop by Ctrl-C says that it
// saves the checkpoint, a finished run prints the commands to try next, and --set changes config fields (checked as
// config.json is).
#include <gtest/gtest.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "core/atomic_file.h"
#include "nn/checkpoint.h"
#include "fixtures.h"

namespace uoe {
namespace {

class TrainCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::temp_dir("train_cli");
    test::micro_data(dir);
    std::ofstream(dir + "/micro.json") << nn::to_json(test::micro_config(nn::FfnKind::UoE)).dump(2);
  }
  std::string train_flags(const std::string& out) const {
    return "train --config " + dir + "/micro.json --data " + dir + "/text.txt --out " + dir + "/" + out +
           " --batch 2 --seq 16 --eval-every 0 --eval-batches 1 --threads 1";
  }
  // uoe train of one step into `out` with `extra` flags: its output, `code` its exit status.
  std::string one_step(const std::string& out, const std::string& extra, int* code) const {
    return test::run_command(std::string(UOE_CLI_PATH) + " " + train_flags(out) + " --steps 1 " + extra, code);
  }
  std::string dir;
};

// The progress lines (a log's, stderr being a pipe) of `out`.
std::vector<std::string> progress_lines(const std::string& out) {
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("step ", 0) == 0 && line.find("tok/s") != std::string::npos) lines.push_back(line);
  return lines;
}

TEST_F(TrainCli, TheProgressEndsWithTheTimeLimitAndTheNextCommandsFollow) {
  int code = 0;
  const std::string out = test::run_command(std::string(UOE_CLI_PATH) + " " + train_flags("timed") +
                                                " --steps 1000000 --minutes 0.02",
                                            &code);
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> lines = progress_lines(out);
  // the first step's line, then the last step's: the run is complete though far from --steps
  ASSERT_GE(lines.size(), 2u) << out;
  EXPECT_NE(lines.back().find("/1000000 |"), std::string::npos) << lines.back();
  EXPECT_NE(lines.back().find("ETA 0:00"), std::string::npos) << lines.back();
  EXPECT_NE(out.find("next:\n  uoe sample  --ckpt " + dir + "/timed/checkpoint"), std::string::npos) << out;
  EXPECT_NE(out.find("uoe plot    --run " + dir + "/timed"), std::string::npos) << out;
  EXPECT_NE(out.find("uoe analyze --ckpt " + dir + "/timed/checkpoint --data " + dir + "/text.txt"), std::string::npos);
  EXPECT_NE(out.find("docs/GUIDE.md"), std::string::npos) << out;
}

TEST_F(TrainCli, CtrlCSaysThatItSavesTheCheckpoint) {
  const std::string log = dir + "/log.txt";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    const std::string cmd = std::string("exec ") + UOE_CLI_PATH + " " + train_flags("stopped") + " --steps 1000000";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  auto steps_logged = [&] {  // whole lines of metrics.jsonl so far
    std::ifstream in(dir + "/stopped/metrics.jsonl");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return std::count(text.begin(), text.end(), '\n');
  };
  for (int i = 0; i < 12000 && steps_logged() < 2; ++i) ::usleep(5000);
  ::kill(pid, SIGINT);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const std::string text = read_file_bytes(log);
  EXPECT_NE(text.find("[train] stopped by signal at step "), std::string::npos) << text;
  EXPECT_NE(text.find(": saving checkpoint...\n"), std::string::npos) << text;
  EXPECT_NE(text.find("next: continue it with the same command and --resume"), std::string::npos) << text;
}

// --set ffn.routing_neurons=4 --set ffn.combine=full_expert trains that model: its checkpoint's config.json holds
// both; an unknown field, or one the FFN kind ignores, is refused before anything is written.
TEST_F(TrainCli, SetChangesConfigFieldsAndRefusesOnesThatDoNotApply) {
  int code = 0;
  const std::string ok = one_step("set", "--set ffn.routing_neurons=4 --set ffn.combine=full_expert", &code);
  ASSERT_EQ(code, 0) << ok;
  const nn::ModelConfig c = nn::checkpoint_config(dir + "/set/checkpoint");
  EXPECT_EQ(c.ffn.routing_neurons, 4);
  EXPECT_EQ(c.ffn.combine, nn::Combine::FullExpert);
  const std::string unknown = one_step("unknown", "--set ffn.routing=topp --set ffn.neurons=4", &code);
  EXPECT_EQ(code, 1) << unknown;
  EXPECT_NE(unknown.find("[config] --set: unknown field 'ffn.neurons', expected one of kind, hidden, n_experts"),
            std::string::npos) << unknown;
  const std::string ignored = one_step("ignored", "--set ffn.kind=dense --set ffn.top_p=0.3", &code);
  EXPECT_EQ(code, 1) << ignored;
  EXPECT_NE(ignored.find("[config] --set: ffn.top_p is ignored by ffn.kind dense (only moe, aoe, uoe use it); "
                         "ffn.kind dense uses kind, hidden"),
            std::string::npos) << ignored;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ignored/metrics.jsonl"));
}

}  // namespace
}  // namespace uoe
