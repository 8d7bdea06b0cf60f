// What training refuses or survives, each found by review: a resumed run keeps its model, seed and data stream
// (another --grad-accum continues it), a torn metrics line, too short a validation split, divergence, --steps
// already reached; on the command line what --resume says, an --out that holds a run, a --config that is not the
// run's, tokens of another vocabulary, flags with bad values, and `uoe sample` on a model whose vocabulary is
// padded past its tokenizer's.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "fixtures.h"
#include "gradcheck.h"
#include "nn/checkpoint.h"
#include "nn/tokenizer.h"

namespace uoe::nn {
namespace {

using test::micro_data;
using test::run_command;
using test::temp_dir;
using uoe::testing::error_of;

ModelConfig micro(FfnKind kind) { return test::micro_config(kind); }

TrainOptions options(const std::string& out, int64_t steps) { return test::micro_train_options(out, steps); }

int64_t saved(const std::string& out, const char* field) {
  return load_checkpoint(out + "/checkpoint", OptimizerState::Skip).trainer_state.at(field).as_int();
}

TEST(TrainingGuards, AResumedRunContinuesItsDataStreamWhateverTheGradAccum) {
  const std::string dir = temp_dir("guards_cursor");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  train(micro(FfnKind::UoE), options(dir + "/run", 2), *data, *tok);
  EXPECT_EQ(saved(dir + "/run", "data_cursor"), 2);
  TrainOptions o = options(dir + "/run", 4);
  o.resume = true;
  o.grad_accum = 2;  // 2 micro-batches per step from here on
  o.allow_change = {"steps", "grad-accum"};
  train(micro(FfnKind::UoE), o, *data, *tok);
  EXPECT_EQ(saved(dir + "/run", "data_cursor"), 2 + 2 * 2) << "micro-batches 2..5, none skipped or replayed";
  EXPECT_EQ(saved(dir + "/run", "tokens_seen"), 6 * 4 * 32);
  EXPECT_EQ(saved(dir + "/run", "seed"), 0);
}

TEST(TrainingGuards, ATornMetricsLineDoesNotStopAResume) {
  const std::string dir = temp_dir("guards_torn");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  train(micro(FfnKind::Dense), options(dir + "/run", 2), *data, *tok);
  std::ofstream(dir + "/run/metrics.jsonl", std::ios::app) << "{\"step\":3,\"train_loss\":5.1,\"l";  // the crash
  TrainOptions o = options(dir + "/run", 4);
  o.resume = true;
  o.allow_change = {"steps"};
  train(micro(FfnKind::Dense), o, *data, *tok);
  const std::vector<json::Value> lines = test::metric_lines(dir + "/run");
  ASSERT_EQ(lines.size(), 4u);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(lines[size_t(i)].at("step").as_int(), i + 1);
}

TEST(TrainingGuards, RefusedBeforeAnyStep) {
  const std::string dir = temp_dir("guards_before");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  // A validation split shorter than one window: found before training, not at the first evaluation.
  TrainOptions o = options(dir + "/short", 3);
  o.seq = data->val_tokens();
  o.batch = 1;
  ModelConfig wide = micro(FfnKind::Dense);
  wide.context = o.seq;
  std::string msg = error_of([&] { train(wide, o, *data, *tok); });
  EXPECT_NE(msg.find("the validation split of '" + dir + "/tokens.bin' has " + std::to_string(o.seq) +
                     " tokens but one window of T=" + std::to_string(o.seq) + " needs " + std::to_string(o.seq + 1)),
            std::string::npos) << msg;
  EXPECT_TRUE(test::metric_lines(dir + "/short").empty());
  // --steps already reached by the run being resumed.
  train(micro(FfnKind::Dense), options(dir + "/done", 3), *data, *tok);
  o = options(dir + "/done", 3);
  o.resume = true;
  msg = error_of([&] { train(micro(FfnKind::Dense), o, *data, *tok); });
  EXPECT_NE(msg.find("[train] steps 3: the run in " + dir + "/done is already at step 3; to train it further, raise steps"),
            std::string::npos) << msg;
}

TEST(TrainingGuards, DivergenceStopsWithTheStepAndKeepsTheLastCheckpoint) {
  const std::string dir = temp_dir("guards_nan");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  TrainOptions o = options(dir + "/run", 40);
  o.lr = 1e4;
  o.clip = 0;
  o.warmup = 0;
  o.min_lr = 1e4;
  o.save_every = 1;
  const std::string msg = error_of([&] { train(micro(FfnKind::Dense), o, *data, *tok); });
  EXPECT_NE(msg.find("training diverged; resume from the last checkpoint with a lower learning rate"), std::string::npos)
      << msg;
  const Checkpoint last = load_checkpoint(dir + "/run/checkpoint");
  for (const auto& [name, t] : last.model)
    for (float v : t.to_vector<float>()) ASSERT_TRUE(std::isfinite(v)) << name;
  EXPECT_NE(msg.find("at step " + std::to_string(last.trainer_state.at("step").as_int() + 1)), std::string::npos)
      << msg;
}

TEST(TrainingGuards, AnUpdateThatBreaksTheWeightsIsNeitherLoggedNorSaved) {
  const std::string dir = temp_dir("guards_val_nan");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  // Step 1's gradient is finite; its update makes the weights infinite. Validated: the validation loss says so.
  TrainOptions o = options(dir + "/validated", 3);
  o.warmup = 0;
  o.lr = o.min_lr = 1e38;
  o.clip = 0;
  o.eval_every = 1;
  o.save_every = 1;
  std::string msg = error_of([&] { train(micro(FfnKind::Dense), o, *data, *tok); });
  EXPECT_NE(msg.find("[train] the validation loss is nan after step 1: training diverged in that step's update"),
            std::string::npos) << msg;
  EXPECT_TRUE(test::metric_lines(dir + "/validated").empty());
  EXPECT_FALSE(std::filesystem::exists(dir + "/validated/checkpoint"));
  // Saved without a validation: the save checks the weights (it wrote them, NaN, and the next step's error said to
  // resume from them).
  o.out_dir = dir + "/saved";
  o.eval_every = 0;
  msg = error_of([&] { train(micro(FfnKind::Dense), o, *data, *tok); });
  EXPECT_NE(msg.find("[train] the weights are not finite after step 1 (norm "), std::string::npos) << msg;
  EXPECT_NE(msg.find("nothing was saved; resume from the last checkpoint with a lower learning rate"), std::string::npos)
      << msg;
  EXPECT_FALSE(std::filesystem::exists(dir + "/saved/checkpoint"));
}

class TrainingCliGuards : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = temp_dir("guards_cli");
    micro_data(dir);
    ModelConfig c = micro(FfnKind::UoE);
    std::ofstream(dir + "/micro.json") << to_json(c).dump(2);
    c.vocab_size = 300;  // padded past the byte tokenizer's 256 ids
    std::ofstream(dir + "/padded.json") << to_json(c).dump(2);
    c.ffn.routing = Routing::TopP;
    std::ofstream(dir + "/topp.json") << to_json(c).dump(2);
  }
  std::string train(const std::string& flags, int* code) const {
    return run_command(std::string(UOE_CLI_PATH) + " train --data " + dir + "/text.txt --batch 2 --seq 16 "
                       "--eval-every 0 --eval-batches 1 --quiet " + flags, code);
  }
  std::string dir;
};

TEST_F(TrainingCliGuards, ResumeSaysWhereItStarts) {
  const std::string flags = "--config " + dir + "/micro.json --out " + dir + "/run --resume";
  int code = 0;
  std::string out = train(flags + " --steps 2", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("--resume: no checkpoint in " + dir + "/run/checkpoint yet, starting at step 0"),
            std::string::npos) << out;
  out = train(flags + " --steps 3 --allow-change steps", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("resuming at step 2 from " + dir + "/run/checkpoint"), std::string::npos) << out;
}

TEST_F(TrainingCliGuards, ANewRunDoesNotReplaceAnEarlierOneUnlessAsked) {
  const std::string flags = "--config " + dir + "/micro.json --out " + dir + "/run";
  int code = 0;
  std::string out = train(flags + " --steps 3", &code);
  ASSERT_EQ(code, 0) << out;
  out = train(flags + " --steps 1", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--out " + dir + "/run already holds a run (a checkpoint at step 3): add --resume to continue "
                     "it, --overwrite to start afresh and replace it, or choose another --out"),
            std::string::npos) << out;
  EXPECT_EQ(test::metric_lines(dir + "/run").size(), 3u) << "the earlier run's metrics are kept";
  out = train(flags + " --steps 1 --overwrite", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(test::metric_lines(dir + "/run").size(), 1u);
  EXPECT_EQ(saved(dir + "/run", "step"), 1);
}

TEST_F(TrainingCliGuards, AResumeKeepsTheRunsModelAndSeed) {
  int code = 0;
  std::string out = train("--config " + dir + "/topp.json --out " + dir + "/run --steps 2", &code);
  ASSERT_EQ(code, 0) << out;
  out = train("--config " + dir + "/padded.json --out " + dir + "/run --steps 2 --resume", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("this run is not the one recorded in " + dir + "/run/checkpoint: model.ffn.routing (\"topk\" "
                     "here, \"topp\" in the checkpoint)."),
            std::string::npos) << out;
  out = train("--out " + dir + "/run --steps 3 --allow-change steps --resume --seed 4", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--seed (4 here, 0 in the checkpoint)"), std::string::npos) << out;
  out = train("--out " + dir + "/run --steps 3 --allow-change steps --resume", &code);  // no --config: the run's own
  ASSERT_EQ(code, 0) << out;
  EXPECT_EQ(load_checkpoint(dir + "/run/checkpoint").config.ffn.routing, Routing::TopP);
}

TEST_F(TrainingCliGuards, TokensOfAnotherVocabularyAreRefused) {
  int code = 0;
  std::string out = run_command(std::string(UOE_CLI_PATH) + " prepare --data " + dir + "/text.txt --out " + dir +
                                    "/bpe.bin --tokenizer bpe:300 --tokenizer-out " + dir + "/bpe.json",
                                &code);
  ASSERT_EQ(code, 0) << out;
  out = train("--config " + dir + "/padded.json --data " + dir + "/bpe.bin --out " + dir + "/bpe --steps 1", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("/bpe.bin holds ids of a vocabulary of 2"), std::string::npos) << out;  // BPE ids past 255
  EXPECT_NE(out.find(" but the tokenizer has 256 ids: use the tokenizer the file was prepared with"),
            std::string::npos) << out;
  // eval of a byte-level checkpoint on those ids: the same error, not an index_select out of range
  out = train("--config " + dir + "/micro.json --out " + dir + "/byte --steps 1", &code);
  ASSERT_EQ(code, 0) << out;
  out = run_command(std::string(UOE_CLI_PATH) + " eval --ckpt " + dir + "/byte/checkpoint --data " + dir + "/bpe.bin",
                    &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uoe eval: --data " + dir + "/bpe.bin holds ids of a vocabulary of"), std::string::npos) << out;
  // the advice fits each command: eval, analyze and a fine-tuning run take the checkpoint's tokenizer, compare
  // the byte tokenizer (none of them has --tokenizer)
  const std::string checkpoint_advice = " ids: pass the text, or tokens prepared with the checkpoint's tokenizer "
                                        "(uoe prepare --tokenizer " + dir + "/byte/checkpoint/tokenizer.json)";
  EXPECT_NE(out.find(checkpoint_advice), std::string::npos) << out;
  out = run_command(std::string(UOE_CLI_PATH) + " analyze --ckpt " + dir + "/byte/checkpoint --data " + dir +
                        "/bpe.bin --out " + dir + "/an",
                    &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find(checkpoint_advice), std::string::npos) << out;
  out = train("--init-from " + dir + "/byte/checkpoint --data " + dir + "/bpe.bin --out " + dir + "/ft --steps 1",
              &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find(checkpoint_advice), std::string::npos) << out;
  out = run_command(std::string(UOE_CLI_PATH) + " compare --data " + dir + "/bpe.bin --archs dense --out " + dir +
                        "/cmp",
                    &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find(" ids: pass the text, or tokens prepared with --tokenizer byte (compare trains byte-level "
                     "models)"),
            std::string::npos) << out;
}

TEST_F(TrainingCliGuards, CommandLineMistakesGetOneClearError) {
  const std::string cli = std::string(UOE_CLI_PATH) + " ", text = dir + "/text.txt";
  int code = 0;
  std::string out = run_command(cli + "prepare --data " + text + " --out " + dir + "/byte.bin", &code);
  ASSERT_EQ(code, 0) << out;
  out = train("--config " + dir + "/micro.json --out " + dir + "/nosave --steps 1 --no-save", &code);
  ASSERT_EQ(code, 0) << out;
  out = train("--config " + dir + "/micro.json --out " + dir + "/ckpt --steps 1", &code);
  ASSERT_EQ(code, 0) << out;
  const std::string ckpt = dir + "/ckpt/checkpoint";
  for (const auto& [command, expected] : std::vector<std::pair<std::string, std::string>>{
           {"prepare --data " + dir + "/byte.bin --out " + dir + "/again.bin", "is already a token file"},
           {"prepare --data " + text + " --out " + dir + "/b.bin --tokenizer bpe:300",
            "--tokenizer-out <file.json> must keep it"},
           {"prepare --data " + text + " --out " + dir + "/b.bin --tokenizer bpe:", "expected bpe:<vocab size>"},
           {"prepare --data " + text + " --out " + dir + "/b.bin --tokenizer bpe:-5", "expected bpe:<vocab size>"},
           {"prepare --data " + text + " --out " + dir + "/b.bin --tokenizer bpe:300 --tokenizer-out " + dir +
                "/missing/b.json",
            "cannot write '" + dir + "/missing/b.json'"},
           {"prepare --data " + text + " --out " + dir + "/b.bin --tokenizer bpe:99999999999999999999 " +
                "--tokenizer-out " + dir + "/b.json",
            "--tokenizer 'bpe:99999999999999999999': the vocab size is too large (at most 2147483647)"},
           {"train --data " + dir + "/byte.bin --tokenizer bpe:300 --out " + dir + "/x",
            "is a prepared token file: pass the tokenizer .json it was prepared with"},
           {"train --config " + dir + "/micro.json --data " + text + " --out " + dir + "/nosave --steps 1",
            "--out " + dir + "/nosave already holds a run (its metrics.jsonl, no checkpoint)"},
           {"train --config " + dir + "/micro.json --data " + text + " --out " + dir + "/ckpt --resume --overwrite",
            "give one of them"},
           {"eval --ckpt " + ckpt + " --data " + text + " --seq 999", "--seq 999 must be in [1, the model context"},
           {"eval --ckpt " + ckpt + " --data " + text + " --max-batches 0", "--batch and --max-batches must be >= 1"},
           {"analyze --ckpt " + ckpt + " --data " + text + " --out " + dir + "/an --samples 0",
            "--batch, --grad-windows and --samples must be >= 1"},
           {"sample --ckpt " + ckpt + " --temprature 0.5", "unknown flag --temprature (this command takes --ckpt, "},
       }) {
    out = run_command(cli + command, &code);
    EXPECT_EQ(code, 1) << command << "\n" << out;
    EXPECT_NE(out.find(expected), std::string::npos) << command << "\n" << out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/b.bin")) << "no token file without the tokenizer that reads it";
}

TEST_F(TrainingCliGuards, SampleDrawsOnlyTheTokenizersIdsAndPrintsEveryByte) {
  int code = 0;
  std::string out = train("--config " + dir + "/padded.json --out " + dir + "/padded --steps 2", &code);
  ASSERT_EQ(code, 0) << out;
  // A flat distribution (temperature 50) over 300 logits: ids 256..299 would be drawn about 15% of the time, and
  // byte 0 about once in 256 draws.
  for (const char* seed : {"1", "2", "3"}) {
    out = run_command(std::string(UOE_CLI_PATH) + " sample --ckpt " + dir + "/padded/checkpoint --prompt AB " +
                          "--tokens 1500 --temperature 50 --seed " + seed,
                      &code);
    ASSERT_EQ(code, 0) << out;
    EXPECT_EQ(out.size(), 2 + 1500 + 1u) << "seed " << seed;  // the prompt, every sampled byte, the newline
  }
}

}  // namespace
}  // namespace uoe::nn
