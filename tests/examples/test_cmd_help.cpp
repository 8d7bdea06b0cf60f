// uoe help, uoe help <command>, uoe <command> --help and -h: every flag of the command's table with its type,
// default and meaning, and an example; flag errors name the flag (unknown, missing value, bad type).
#include <gtest/gtest.h>

#include <string>

#include "fixtures.h"

namespace uoe {
namespace {

using test::run_command;

std::string uoe(const std::string& args, int* code) { return run_command(std::string(UOE_CLI_PATH) + " " + args, code); }

const char* const kCommands[] = {"train", "eval", "sample", "info", "prepare", "compare", "plot", "analyze", "graph"};

TEST(HelpCli, EveryWayOfAskingPrintsTheCommandsFlagsWithTypeDefaultAndAnExample) {
  int code = 0;
  const std::string train = uoe("train --help", &code);
  EXPECT_EQ(code, 0) << train;
  // defaults from TrainOptions{} and the other tables, each flag with its type and meaning
  for (const char* line : {"--steps INT=1000", "--batch INT=16", "--lr NUMBER=0.001", "--eval-every INT=100",
                           "--optimizer TEXT=adamw", "--clip NUMBER=1", "--weight-decay NUMBER=0.1",
                           "--minutes NUMBER=0", "--data TEXT REQUIRED", "--resume", "optimiser steps"})
    EXPECT_NE(train.find(line), std::string::npos) << line << "\n" << train;
  EXPECT_NE(train.find("Example:\n  uoe train --config tiny-uoe"), std::string::npos) << train;
  EXPECT_EQ(uoe("train -h", &code), train);
  EXPECT_EQ(uoe("help train", &code), train);
  EXPECT_EQ(code, 0);
  // `uoe help`: the overview, then every command's help
  const std::string all = uoe("help", &code);
  EXPECT_EQ(code, 0);
  for (const char* command : kCommands) {
    EXPECT_NE(all.find(uoe(std::string(command) + " --help", &code)), std::string::npos) << command;
    EXPECT_EQ(code, 0) << command;
  }
  EXPECT_NE(all.find("--top-p NUMBER=1"), std::string::npos);
  EXPECT_NE(all.find("--samples INT=2048"), std::string::npos) << "analyze's defaults come from AnalysisOptions{}";
  EXPECT_EQ(uoe("--help", &code), all);
  EXPECT_EQ(uoe("-h", &code), all);
  uoe("help bogus", &code);
  EXPECT_EQ(code, 2);
}

TEST(HelpCli, FlagErrorsNameTheFlagAndPointToHelp) {
  int code = 0;
  std::string out = uoe("eval --ckpt x --bogus 3", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("uoe eval: unknown flag --bogus (this command takes --ckpt, --data, "), std::string::npos) << out;
  EXPECT_NE(out.find("uoe eval --help explains them)"), std::string::npos) << out;
  out = uoe("sample --ckpt x --tokens", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("uoe sample: flag --tokens needs a value"), std::string::npos) << out;
  out = uoe("sample --ckpt x --temperature warm", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("uoe sample: --temperature expects a number, got 'warm'"), std::string::npos) << out;
  out = uoe("plot stray", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("unexpected argument 'stray' (flags start with --)"), std::string::npos) << out;
  out = uoe("eval --data x", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("uoe eval: --ckpt is required"), std::string::npos) << out;
}

}  // namespace
}  // namespace uoe
