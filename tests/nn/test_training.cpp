// Training end to end on a micro model: losses fall, runs are deterministic bit for bit whatever
// the thread count, resume (also after kill -9) continues bit-exactly, checkpoints round-trip.
#include <gtest/gtest.h>
#include <omp.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/json.h"
#include "fixtures.h"
#include "gradcheck.h"
#include "nn/accounting.h"
#include "core/safetensors.h"
#include "nn/checkpoint.h"
#include "nn/trainer.h"

namespace uoe::nn {
namespace {

using test::micro_data;
using test::run_command;
using test::temp_dir;
using testing::error_of;

ModelConfig micro(FfnKind kind) { return test::micro_config(kind); }

TrainOptions options(const std::string& out, int64_t steps) { return test::micro_train_options(out, steps); }

std::vector<double> losses(const std::string& out) {
  std::vector<double> v;
  for (const json::Value& line : test::metric_lines(out)) v.push_back(line.at("train_loss").as_double());
  return v;
}

TEST(Training, EveryKindLearnsAndWritesMetricsAndCheckpoint) {
  const std::string dir = temp_dir("kinds");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  for (FfnKind kind : {FfnKind::Dense, FfnKind::MoE, FfnKind::AoE, FfnKind::UoE}) {
    const std::string out = dir + "/" + ffn_kind_name(kind);
    const TrainResult r = train(micro(kind), options(out, 30), *data, *tok);
    const auto l = losses(out);
    ASSERT_EQ(l.size(), 30u) << ffn_kind_name(kind);
    EXPECT_LT(l.back(), l.front() - 1.0) << ffn_kind_name(kind);
    EXPECT_GT(r.final_val_loss, 0.0);
    const Checkpoint c = load_checkpoint(out + "/checkpoint");
    EXPECT_EQ(c.trainer_state.at("step").as_int(), 30);
    EXPECT_EQ(c.config.ffn.kind, kind);
    EXPECT_FALSE(c.optimizer.empty());
  }
}

TEST(Training, SameSeedSameLossesWhateverTheThreadCount) {
  const std::string dir = temp_dir("threads");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  const int saved = omp_get_max_threads();
  omp_set_num_threads(1);
  train(micro(FfnKind::UoE), options(dir + "/a", 8), *data, *tok);
  omp_set_num_threads(2);
  train(micro(FfnKind::UoE), options(dir + "/b", 8), *data, *tok);
  omp_set_num_threads(saved);
  EXPECT_EQ(losses(dir + "/a"), losses(dir + "/b"));
}

// Starts `uoe train` (the CLI built beside the tests) on the micro UoE config; returns the pid.
pid_t spawn_train(const std::string& dir, const std::string& out, bool resume, int64_t save_every, int64_t steps = 12) {
  std::vector<std::string> args = {UOE_CLI_PATH, "train", "--config", dir + "/micro.json", "--data", dir + "/text.txt",
                                   "--out", out, "--steps", std::to_string(steps), "--batch", "4", "--seq", "32", "--lr", "3e-3",
                                   "--warmup", "2", "--eval-every", "0", "--eval-batches", "2", "--save-every",
                                   std::to_string(save_every), "--quiet"};
  if (resume) args.push_back("--resume");
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::freopen("/dev/null", "w", stdout);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(Training, ResumeAfterKillIsBitExact) {
  const std::string dir = temp_dir("resume");
  micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(micro(FfnKind::UoE)).dump(2);
  ASSERT_EQ(wait_for(spawn_train(dir, dir + "/straight", false, 0)), 0);
  // kill -9 the second run once it has checkpointed step 4 or later, then resume it
  const pid_t child = spawn_train(dir, dir + "/split", false, 1);
  ASSERT_GT(child, 0);
  for (int i = 0; i < 12000; ++i) {
    usleep(5000);
    try {  // read without recovery: the writer is still running
      if (json::read_file(dir + "/split/checkpoint/trainer_state.json").at("step").as_int() >= 4) break;
    } catch (const Error&) {
      // not written yet, or caught between the writer's renames: look again
    }
  }
  kill(child, SIGKILL);
  wait_for(child);
  const int64_t at = load_checkpoint(dir + "/split/checkpoint").trainer_state.at("step").as_int();
  EXPECT_GE(at, 4);
  ASSERT_EQ(wait_for(spawn_train(dir, dir + "/split", true, 0)), 0);
  const auto straight = losses(dir + "/straight"), split = losses(dir + "/split");
  EXPECT_EQ(straight.size(), 12u);
  EXPECT_EQ(straight, split) << "resumed from step " << at;
}

TEST(Training, InitFromStartsAFreshRunFromACheckpointsWeights) {
  const std::string dir = temp_dir("init_from");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  train(micro(FfnKind::UoE), options(dir + "/base", 6), *data, *tok);
  const Checkpoint base = load_checkpoint(dir + "/base/checkpoint");
  // One step at a learning rate too small to move any weight: the fine-tuning run's weights are the base's.
  TrainOptions o = options(dir + "/tuned", 1);
  o.init_from = dir + "/base/checkpoint";
  o.lr = 1e-12;
  o.warmup = 0;
  o.min_lr = 1e-12;
  train(micro(FfnKind::UoE), o, *data, *tok);
  const Checkpoint tuned = load_checkpoint(dir + "/tuned/checkpoint");
  for (const auto& [name, t] : base.model) {
    const std::vector<float> a = t.to_vector<float>(), b = tuned.model.at(name).to_vector<float>();
    ASSERT_EQ(a.size(), b.size()) << name;
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-6 + 1e-6 * std::abs(a[i])) << name << " " << i;
  }
  EXPECT_EQ(tuned.trainer_state.at("step").as_int(), 1);  // a fresh run, not the base's step 6
  EXPECT_EQ(tuned.optimizer.at("step").item<int64_t>(), 1);
  EXPECT_EQ(tuned.trainer_state.at("init_from").as_string(), dir + "/base/checkpoint");
  // Its first loss is the trained model's, far below a fresh model's first loss.
  const auto fresh = losses(dir + "/base"), from_base = losses(dir + "/tuned");
  ASSERT_EQ(from_base.size(), 1u);
  EXPECT_LT(from_base[0], fresh[0] - 0.2) << "fresh " << fresh[0] << ", fine-tuned " << from_base[0];
}

TEST(Training, InitFromOnTheCommandLine) {
  const std::string dir = temp_dir("init_from_cli");
  micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(micro(FfnKind::MoE)).dump(2);
  const std::string cli = std::string(UOE_CLI_PATH) + " train --data " + dir + "/text.txt --batch 2 --seq 16 "
                          "--eval-every 0 --quiet --steps 2 ";
  int code = 0;
  std::string out = run_command(cli + "--config " + dir + "/micro.json --out " + dir + "/base", &code);
  ASSERT_EQ(code, 0) << out;
  out = run_command(cli + "--init-from " + dir + "/base/checkpoint --out " + dir + "/tuned", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("starting from the weights of " + dir + "/base/checkpoint (a fresh optimiser, step 0)"),
            std::string::npos) << out;
  EXPECT_NE(out.find("micro (moe FFN)"), std::string::npos) << "the checkpoint's model: " << out;
  out = run_command(cli + "--init-from " + dir + "/base/checkpoint --config tiny-uoe --out " + dir + "/x", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("leave out --config and --tokenizer"), std::string::npos) << out;
  out = run_command(cli + "--init-from " + dir + "/nothing --out " + dir + "/y", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--init-from " + dir + "/nothing: no checkpoint there"), std::string::npos) << out;
}

TEST(Training, SigtermSavesACheckpointAndExitsCleanly) {
  const std::string dir = temp_dir("sigterm");
  micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(micro(FfnKind::MoE)).dump(2);
  const pid_t child = spawn_train(dir, dir + "/run", false, 0, 100000);
  for (int i = 0; i < 12000 && losses(dir + "/run").size() < 3; ++i) usleep(5000);
  kill(child, SIGTERM);
  EXPECT_EQ(wait_for(child), 0);
  const auto l = losses(dir + "/run");
  ASSERT_GE(l.size(), 3u);
  EXPECT_EQ(load_checkpoint(dir + "/run/checkpoint").trainer_state.at("step").as_int(), int64_t(l.size()));
}

TEST(Training, GradientAccumulationAndSgdTrain) {
  const std::string dir = temp_dir("accum");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  TrainOptions o = options(dir + "/accum", 20);
  o.grad_accum = 2;
  o.batch = 2;
  train(micro(FfnKind::AoE), o, *data, *tok);
  const auto l = losses(dir + "/accum");
  ASSERT_EQ(l.size(), 20u);
  EXPECT_LT(l.back(), l.front() - 0.5);
  TrainOptions s = options(dir + "/sgd", 20);
  s.optimizer = "sgd";
  s.lr = 0.3;
  train(micro(FfnKind::Dense), s, *data, *tok);
  const auto ls = losses(dir + "/sgd");
  EXPECT_LT(ls.back(), ls.front() - 0.5);
}

TEST(Training, CliEvalSampleInfoAndErrors) {
  const std::string dir = temp_dir("cli");
  micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(micro(FfnKind::UoE)).dump(2);
  ASSERT_EQ(wait_for(spawn_train(dir, dir + "/nested/run", false, 0, 4)), 0);  // parents are created
  const std::string cli = UOE_CLI_PATH, ckpt = dir + "/nested/run/checkpoint";
  int code = 0;
  std::string out = run_command(cli + " eval --ckpt " + ckpt + " --data " + dir + "/text.txt --seq 32", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_NE(out.find("nats/token"), std::string::npos) << out;
  EXPECT_NE(out.find("bits/byte"), std::string::npos) << out;
  out = run_command(cli + " sample --ckpt " + ckpt + " --prompt 'the quick' --tokens 20 --top-k 5 --seed 3", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.rfind("the quick", 0), 0u) << out;
  EXPECT_EQ(out, run_command(cli + " sample --ckpt " + ckpt + " --prompt 'the quick' --tokens 20 --top-k 5 --seed 3", &code));
  // nucleus sampling: a tiny mass keeps only the most probable token, as greedy decoding does
  const std::string greedy = run_command(cli + " sample --ckpt " + ckpt + " --prompt 'the quick' --tokens 12 " +
                                         "--temperature 0", &code);
  EXPECT_EQ(code, 0) << greedy;
  EXPECT_EQ(run_command(cli + " sample --ckpt " + ckpt + " --prompt 'the quick' --tokens 12 --top-p 1e-6 --seed 4",
                        &code),
            greedy);
  out = run_command(cli + " sample --ckpt " + ckpt + " --prompt 'x' --tokens 3 --top-p 1.5", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--top-p 1.5: expected a probability mass in (0, 1]"), std::string::npos) << out;
  // bfloat16 compute, greedy; a GPU that is not there is one clear error
  out = run_command(cli + " sample --ckpt " + ckpt + " --prompt 'the quick' --tokens 8 --temperature 0 --dtype bf16 " +
                        "--device cpu", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.rfind("the quick", 0), 0u) << out;
  out = run_command(cli + " eval --ckpt " + ckpt + " --data " + dir + "/text.txt --seq 32 --device cuda:7", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--device cuda:7: no such CUDA device is visible"), std::string::npos) << out;
  out = run_command(cli + " info --config tiny-uoe", &code);
  EXPECT_EQ(code, 0);
  for (const char* kind : {"dense", "moe", "aoe", "uoe  "}) EXPECT_NE(out.find(kind), std::string::npos) << out;
  out = run_command(cli + " train --config tiny-uoe --bogus 1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("uoe train: unknown flag --bogus"), std::string::npos) << out;  // one prefix
  EXPECT_EQ(out.find("uoe train: uoe train"), std::string::npos) << out;
  out = run_command(cli + " train --config tiny-uoe --lr nan --out " + dir + "/nan", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--lr expects a finite number, got 'nan'"), std::string::npos) << out;
  out = run_command(cli + " sample --ckpt " + ckpt + " --tokens -1", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("--tokens must be >= 0"), std::string::npos) << out;
  std::ofstream(dir + "/short.txt") << "too short";
  out = run_command(cli + " eval --ckpt " + ckpt + " --data " + dir + "/short.txt", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("(the tokens of '" + dir + "/short.txt') has 0 tokens"), std::string::npos) << out;
  out = run_command(cli + " eval --ckpt " + dir + "/nothing --data x", &code);
  EXPECT_EQ(code, 1);
  EXPECT_NE(out.find("no checkpoint"), std::string::npos) << out;
}

// A checkpoint of an untrained model of `config` with `tokenizer`, written straight to dir.
void untrained_checkpoint(const std::string& dir, const ModelConfig& config, const Tokenizer& tokenizer) {
  LanguageModel model(config);
  save_checkpoint(dir, model, config, nullptr, json::Value::object(), tokenizer);
}

TEST(Training, CliSampleBeyondAContextOfOneToken) {
  const std::string dir = temp_dir("sample_context1");
  ModelConfig c = micro(FfnKind::Dense);
  c.context = 1;
  untrained_checkpoint(dir + "/ckpt", c, *make_byte_tokenizer());
  int code = 0;
  const std::string out = run_command(std::string(UOE_CLI_PATH) + " sample --ckpt " + dir + "/ckpt --prompt ab " +
                                          "--tokens 4 --temperature 0", &code);
  EXPECT_EQ(code, 0) << out;
  EXPECT_EQ(out.size(), 2u + 4u + 1u) << out;  // the prompt, 4 new bytes and the newline
}

TEST(Training, CliRefusesACheckpointWhoseTokenizerOutgrowsItsModel) {
  const std::string dir = temp_dir("ckpt_vocab");
  micro_data(dir);
  const BpeTokenizer bpe({{'t', 'h'}, {256, 'e'}});  // 258 ids for a model of 256
  untrained_checkpoint(dir + "/ckpt", micro(FfnKind::Dense), bpe);
  const std::string cli = UOE_CLI_PATH;
  int code = 0;
  for (const std::string& command : {" eval --ckpt " + dir + "/ckpt --data " + dir + "/text.txt --seq 32",
                                     " sample --ckpt " + dir + "/ckpt --prompt ' the' --tokens 2"}) {
    const std::string out = run_command(cli + command, &code);
    EXPECT_EQ(code, 1) << out;
    EXPECT_NE(out.find("tokenizer.json has 258 ids but the model (config.json) embeds only vocab_size 256"),
              std::string::npos) << out;
  }
}

TEST(Training, BadNumericOptionsAreNamedBeforeAnyWork) {
  const std::string dir = temp_dir("bad_options");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  const std::vector<std::pair<std::function<void(TrainOptions&)>, std::string>> cases = {
      {[](TrainOptions& o) { o.steps = 0; }, "steps, batch, seq and grad_accum must be positive"},
      {[](TrainOptions& o) { o.grad_accum = -1; }, "steps, batch, seq and grad_accum must be positive"},
      {[](TrainOptions& o) { o.lr = 0; }, "lr must be a positive finite number, got 0"},
      {[](TrainOptions& o) { o.lr = std::numeric_limits<double>::infinity(); }, "lr must be a positive finite"},
      {[](TrainOptions& o) { o.min_lr = 1; }, "min_lr must be finite and at most lr"},
      {[](TrainOptions& o) { o.clip = -1; }, "clip must be >= 0 (0: no clipping), got -1"},
      {[](TrainOptions& o) { o.weight_decay = std::nan(""); }, "weight_decay must be >= 0"},
      {[](TrainOptions& o) { o.beta2 = 1; }, "beta1, beta2 and momentum must be in [0, 1)"},
      {[](TrainOptions& o) { o.save_every = -5; }, "eval_every and save_every must be >= 0"},
      {[](TrainOptions& o) { o.keep_checkpoints = -1; }, "keep_checkpoints must be >= 0 (0: only the latest), got -1"},
      {[](TrainOptions& o) { o.eval_batches = 0; }, "eval_batches must be positive, got 0"},
      {[](TrainOptions& o) { o.time_limit_s = -60; }, "time_limit_s must be >= 0 (0: no limit), got -60"},
      // a std::bad_alloc (or minutes of allocating) before
      {[](TrainOptions& o) { o.batch = 1000000000; },
       "batch 1000000000 x seq 32 is 3.2e+10 tokens per micro-batch; at most 268435456"},
  };
  for (const auto& [spoil, expected] : cases) {
    TrainOptions o = options(dir + "/run", 3);
    spoil(o);
    const std::string msg = uoe::testing::error_of([&] { train(micro(FfnKind::Dense), o, *data, *tok); });
    EXPECT_NE(msg.find("[train] " + expected), std::string::npos) << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(dir + "/run"));  // refused before the output directory was made
}

TEST(Training, NoSaveRunReportsFlopsAndMemoryAndLeavesNoCheckpoint) {
  const std::string dir = temp_dir("nosave");
  micro_data(dir);
  std::ofstream(dir + "/micro.json") << to_json(micro(FfnKind::MoE)).dump(2);
  int code = 0;
  const std::string out = run_command(std::string(UOE_CLI_PATH) + " train --config " + dir + "/micro.json --data " +
                                          dir + "/text.txt --out " + dir + "/run --steps 3 --batch 2 --seq 16 " +
                                          "--eval-every 0 --eval-batches 1 --no-save --quiet",
                                      &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("no checkpoint (--no-save)"), std::string::npos) << out;
  EXPECT_FALSE(checkpoint_exists(dir + "/run/checkpoint"));
  std::ifstream in(dir + "/run/metrics.jsonl");
  std::string line, last;
  while (std::getline(in, line)) last = line;
  const json::Value m = json::parse(last, "metrics");
  // model FLOPs per second = tokens/s x 3 x the forward FLOPs per token at seq 16
  const double flops = training_flops_per_token(micro(FfnKind::MoE), 16);
  EXPECT_NEAR(m.at("model_tflops").as_double(), m.at("tokens_per_s").as_double() * flops / 1e12,
              1e-9 * m.at("model_tflops").as_double());
  EXPECT_GT(m.at("peak_memory_mib").as_double(), 0.0);
}

TEST(Training, CheckpointRoundTripAndBadDirectory) {
  const std::string dir = temp_dir("ckpt");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  train(micro(FfnKind::MoE), options(dir + "/run", 3), *data, *tok);
  const Checkpoint c = load_checkpoint(dir + "/run/checkpoint");
  LanguageModel model(c.config);
  model.load_state_dict(c.model);
  for (auto& [name, t] : model.state_dict()) EXPECT_EQ(t.to_vector<float>(), c.model.at(name).to_vector<float>()) << name;
  EXPECT_FALSE(c.optimizer.empty());
  const Checkpoint without = load_checkpoint(dir + "/run/checkpoint", OptimizerState::Skip);
  EXPECT_TRUE(without.optimizer.empty());
  EXPECT_EQ(without.model.size(), c.model.size());
  EXPECT_THROW(load_checkpoint(dir + "/missing"), Error);
}

// Rewrites one tensor of a checkpoint file.
void replace_tensor(const std::string& file, const std::string& name, const Tensor& value) {
  std::vector<safetensors::Named> tensors = safetensors::load(file).tensors;
  for (auto& n : tensors)
    if (n.name == name) n.tensor = value;
  safetensors::save(file, tensors);
}

TEST(Training, CheckpointTensorsOfTheWrongKindAreRefusedNamingTheFile) {
  const std::string dir = temp_dir("ckpt_kinds");
  auto data = micro_data(dir);
  auto tok = make_byte_tokenizer();
  // A 1-step run in `out`; resuming it to step 2 gives the error, if any.
  const auto resume_error = [&](const std::string& out) {
    TrainOptions resume = options(out, 2);
    resume.resume = true;
    resume.allow_change = {"steps"};
    return error_of([&] { train(micro(FfnKind::MoE), resume, *data, *tok); });
  };
  const auto int_ones = [](int64_t n, DType dtype) { return ones({n}, TensorOptions{}.with_dtype(dtype)); };

  train(micro(FfnKind::MoE), options(dir + "/opt", 1), *data, *tok);
  const std::string opt = dir + "/opt/checkpoint/optimizer.safetensors";
  replace_tensor(opt, "step", scalar_tensor(-5, TensorOptions{}.with_dtype(DType::Int64)));
  std::string msg = resume_error(dir + "/opt");  // AdamW's bias correction would make every weight NaN
  EXPECT_NE(msg.find("[checkpoint] " + opt + ": 'step' must be a 0-dim int64 count >= 0, got int64[] = -5"),
            std::string::npos) << msg;
  replace_tensor(opt, "step", scalar_tensor(1));
  msg = resume_error(dir + "/opt");
  EXPECT_NE(msg.find("'step' must be a 0-dim int64 count >= 0, got float32[] = 1"), std::string::npos) << msg;
  replace_tensor(opt, "step", scalar_tensor(1, TensorOptions{}.with_dtype(DType::Int64)));
  replace_tensor(opt, "final_norm.weight.exp_avg", int_ones(32, DType::Int32));
  msg = resume_error(dir + "/opt");
  EXPECT_NE(msg.find(opt + ": 'final_norm.weight.exp_avg' is int32; optimizer state is floating-point"),
            std::string::npos) << msg;

  train(micro(FfnKind::MoE), options(dir + "/model", 1), *data, *tok);
  const std::string model = dir + "/model/checkpoint/model.safetensors";
  replace_tensor(model, "final_norm.weight", int_ones(32, DType::Int64));
  msg = resume_error(dir + "/model");
  EXPECT_NE(msg.find("[load_state_dict] " + model + ": tensor 'final_norm.weight' is int64 but the model's is "
                     "float32: weights must be floating-point"), std::string::npos) << msg;
  replace_tensor(model, "final_norm.weight", ones({8}));
  msg = resume_error(dir + "/model");
  EXPECT_NE(msg.find(model + ": tensor 'final_norm.weight' has shape [8] but the model expects [32]"),
            std::string::npos) << msg;
}

}  // namespace
}  // namespace uoe::nn
