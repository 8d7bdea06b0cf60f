// Run identity on resume (issue 18, F8): a resumed run that differs from its checkpoint's in a setting is refused,
// naming each field with both values, unless TrainOptions::allow_change (the CLI: --allow-change) names it; the
// model, data and seed never change; a checkpoint from before identities were recorded still resumes; `uoe train
// --resume` takes the settings it is not given from the run. The library's messages name its fields, the program's
// its flags.
#include <gtest/gtest.h>

#include <fstream>

#include "fixtures.h"
#include "gradcheck.h"
#include "nn/checkpoint.h"
#include "nn/tokenizer.h"

namespace uoe::nn {
namespace {

using test::micro_data;
using test::temp_dir;
using uoe::testing::error_of;
using uoe::testing::expect_has;

json::Value recorded_run(const std::string& out) {
  return json::read_file(out + "/checkpoint/trainer_state.json").at("run");
}

TEST(RunIdentity, AResumeThatChangesASettingIsRefusedUnlessAllowed) {
  const std::string dir = temp_dir("identity_allowed");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  train(test::micro_config(FfnKind::UoE), test::micro_train_options(dir + "/run", 2), *data, *tok);
  TrainOptions o = test::micro_train_options(dir + "/run", 3);
  o.resume = true;
  o.batch = 2;
  const std::string msg = error_of([&] { train(test::micro_config(FfnKind::UoE), o, *data, *tok); });
  // The library names its own fields (the uoe program names its flags: below).
  expect_has(msg, "[train] TrainOptions::resume: this run is not the one recorded in " + dir + "/run/checkpoint: "
                  "TrainOptions::steps (3 here, 2 in the checkpoint), TrainOptions::batch (2 here, 4 in the "
                  "checkpoint).");
  expect_has(msg, "Leave those settings at the run's values to resume bit-exactly, or pass "
                  "TrainOptions::allow_change steps,batch to change them");
  EXPECT_EQ(msg.find("--"), std::string::npos) << msg;
  EXPECT_EQ(recorded_run(dir + "/run").at("steps").as_int(), 2) << "the refused resume saved nothing";
  o.allow_change = {"steps", "batch"};
  EXPECT_EQ(train(test::micro_config(FfnKind::UoE), o, *data, *tok).steps, 3);
  EXPECT_EQ(recorded_run(dir + "/run").at("steps").as_int(), 3);
  EXPECT_EQ(recorded_run(dir + "/run").at("batch").as_int(), 2);
}

TEST(RunIdentity, TheModelDataAndSeedNeverChangeOnResume) {
  const std::string dir = temp_dir("identity_never");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  train(test::micro_config(FfnKind::UoE), test::micro_train_options(dir + "/run", 2), *data, *tok);
  TrainOptions o = test::micro_train_options(dir + "/run", 2);
  o.resume = true;
  ModelConfig other = test::micro_config(FfnKind::UoE);
  other.ffn.top_k = 1;
  std::string msg = error_of([&] { train(other, o, *data, *tok); });
  expect_has(msg, "this run is not the one recorded in " + dir + "/run/checkpoint: model.ffn.top_k (1 here, 2 in "
                  "the checkpoint).");
  expect_has(msg, "or start a new run from its weights with TrainOptions::init_from " + dir + "/run/checkpoint");
  // other tokens: the same count, other ids
  std::vector<int32_t> ids;
  for (int64_t i = 0; i < data->file().size(); ++i) ids.push_back(int32_t((data->file()[i] + 1) % 256));
  write_token_file(dir + "/other.bin", ids, 256);
  const TokenDataset other_data(std::make_shared<TokenFile>(dir + "/other.bin"));
  msg = error_of([&] { train(test::micro_config(FfnKind::UoE), o, other_data, *tok); });
  expect_has(msg, "this run is not the one recorded in " + dir + "/run/checkpoint: data.hash (\"");
  o.seed = 5;
  msg = error_of([&] { train(test::micro_config(FfnKind::UoE), o, *data, *tok); });
  expect_has(msg, "TrainOptions::seed (5 here, 0 in the checkpoint)");
  expect_has(msg, "resume with the run's own model configuration, TrainOptions::seed and TrainOptions::optimizer, on "
                  "the TrainOptions::data_file it was trained on, or start a new run from its weights with "
                  "TrainOptions::init_from " + dir + "/run/checkpoint.");
  o.allow_change = {"seed"};
  msg = error_of([&] { train(test::micro_config(FfnKind::UoE), o, *data, *tok); });
  expect_has(msg, "TrainOptions::allow_change seed: not a setting that may change on resume (those are steps, "
                  "batch, seq, grad-accum, lr, min-lr, warmup,");
}

TEST(RunIdentity, ACheckpointWithoutARunIdentityStillResumes) {
  const std::string dir = temp_dir("identity_old");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  train(test::micro_config(FfnKind::Dense), test::micro_train_options(dir + "/run", 2), *data, *tok);
  const std::string state_path = dir + "/run/checkpoint/trainer_state.json";
  json::Value old = json::Value::object();  // trainer_state.json as uoe wrote it before run identities
  const json::Value state = json::read_file(state_path);
  for (const auto& [key, v] : state.items())
    if (key != "run") old[key] = v;
  std::ofstream(state_path) << old.dump(2);
  TrainOptions o = test::micro_train_options(dir + "/run", 2);
  o.resume = true;
  o.seed = 3;  // what such a checkpoint records is still checked
  expect_has(error_of([&] { train(test::micro_config(FfnKind::Dense), o, *data, *tok); }),
             "TrainOptions::seed (3 here, 0 in the checkpoint)");
  o.seed = 0;
  o.steps = 3;
  o.allow_change = {"steps"};
  EXPECT_EQ(train(test::micro_config(FfnKind::Dense), o, *data, *tok).steps, 3);
  EXPECT_EQ(recorded_run(dir + "/run").at("batch").as_int(), 4) << "its next checkpoint records the whole identity";
}

TEST(RunIdentity, ARestartTakesTheRunsSettingsAndRefusesOthers) {
  const std::string dir = temp_dir("identity_cli");
  micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(test::micro_config(FfnKind::UoE)).dump(2);
  const std::string train = std::string(UOE_CLI_PATH) + " train --data " + dir + "/text.txt --out " + dir +
                            "/run --eval-every 0 --eval-batches 1 --quiet ";
  int code = 0;
  std::string out = test::run_command(train + "--config " + dir + "/micro.json --steps 2 --batch 2 --seq 16 --lr 2e-3 "
                                      "--warmup 1 --grad-accum 2", &code);
  ASSERT_EQ(code, 0) << out;
  out = test::run_command(train + "--resume --steps 3 --allow-change steps", &code);  // nothing else repeated
  ASSERT_EQ(code, 0) << out;
  expect_has(out, "[train] resuming with --steps 3 (the run had 2; --allow-change steps): the cosine schedule now "
                  "spans the new number of steps");
  const json::Value run = recorded_run(dir + "/run");
  EXPECT_EQ(run.at("lr").as_double(), 2e-3);
  EXPECT_EQ(run.at("batch").as_int(), 2);
  EXPECT_EQ(run.at("seq").as_int(), 16);
  EXPECT_EQ(run.at("warmup").as_int(), 1);
  EXPECT_EQ(run.at("grad-accum").as_int(), 2);
  out = test::run_command(train + "--resume --steps 4 --allow-change steps --lr 1e-3 --batch 4", &code);
  EXPECT_EQ(code, 1) << out;
  expect_has(out, "--batch (4 here, 2 in the checkpoint), --lr (0.001 here, 0.002 in the checkpoint).");
  expect_has(out, "pass --allow-change batch,lr to change them");
  out = test::run_command(train + "--resume --allow-change model", &code);
  EXPECT_EQ(code, 1) << out;
  expect_has(out, "--allow-change model: not a setting that may change on resume");
}

}  // namespace
}  // namespace uoe::nn
