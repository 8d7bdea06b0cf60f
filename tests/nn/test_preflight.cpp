// Memory preflight: the limits read from /proc and the cgroup files, the refusal with the estimate, the limit and
// the largest batch that fits, the inference estimate against the allocator's peak, and the commands refusing a
// run far too large for any machine within a second (or starting it with --skip-memory-check).
#include <gtest/gtest.h>

#include <fstream>

#include "core/allocator.h"
#include "core/memory_limits.h"
#include "core/option_names.h"
#include "fixtures.h"
#include "gradcheck.h"
#include "nn/checkpoint.h"
#include "nn/preflight.h"

namespace uoe::nn {
namespace {

using uoe::testing::error_of;
using uoe::testing::expect_has;
constexpr double kMiB = 1 << 20;

TEST(Preflight, ReadsTheLimitsOfProcAndTheCgroup) {
  EXPECT_EQ(meminfo_available("MemTotal:  32000 kB\nMemFree:   100 kB\nMemAvailable:    2048 kB\n"), 2048.0 * 1024);
  EXPECT_FALSE(meminfo_available("MemTotal: 1 kB\n").has_value());
  const std::string v1 = "12:pids:/\n4:cpu,memory:/slurm/uid_1/job_7\n0::/user.slice\n";
  EXPECT_EQ(cgroup_path(v1, "memory"), "/slurm/uid_1/job_7");
  EXPECT_EQ(cgroup_path(v1, ""), "/user.slice");
  EXPECT_FALSE(cgroup_path("4:cpu:/\n", "memory").has_value());
  EXPECT_EQ(memory_stat_field("anon 10\nfile 20\ninactive_file 7\n", "inactive_file"), 7);
  EXPECT_EQ(memory_stat_field("anon 10\n", "total_inactive_file"), 0);
  for (const MemoryLimit& l : host_memory_limits()) EXPECT_FALSE(l.source.empty());
}

TEST(Preflight, NamesTheBatchAsTheProgramDoes) {
  const EstimateAt at = [](int64_t batch) { return double(100 + 10 * batch) * double(1 << 20); };
  const std::vector<MemoryLimit> limits = {{1000 * double(1 << 20), "ulimit -v", false}};
  const auto message = [&] { return error_of([&] { check_memory("eval", limits, "Opts::rows", 200, at, 1, "."); }); };
  expect_has(message(), "at Opts::rows 200 (the memory estimate of uoe info)");  // the library's own name
  set_option_namer([](const std::string& field) -> std::optional<std::string> {
    return field == "Opts::rows" ? std::optional<std::string>("--rows") : std::nullopt;
  });
  const std::string named = message();
  set_option_namer(nullptr);
  expect_has(named, "at --rows 200 (the memory estimate of uoe info) but 1000 MiB is available (ulimit -v): --rows 80 "
                    "fits with a tenth to spare");
}

TEST(Preflight, RefusesWithTheEstimateTheLimitAndTheLargestBatchThatFits) {
  int estimates = 0;  // the search for a batch that fits asks the estimate a few times, not once per batch size
  const EstimateAt at = [&estimates](int64_t batch) {
    ++estimates;
    return (100 + 10 * double(batch)) * kMiB;
  };
  const std::vector<MemoryLimit> limits = {{1000 * kMiB, "MemAvailable of /proc/meminfo", true},
                                           {5000 * kMiB, "ulimit -v", false}};
  check_memory("eval", limits, "InferenceOptions::batch", 80, at, 1, "skip");  // 900 MiB: fits
  estimates = 0;
  std::string msg = error_of([&] { check_memory("eval", limits, "InferenceOptions::batch", 200, at, 1, "skip it."); });
  EXPECT_LE(estimates, 20);
  // the largest batch within 90% of the room: 100 + 10 b <= 900
  expect_has(msg, "[eval] this run needs about 2.1 GiB per process at InferenceOptions::batch 200 (the memory "
                  "estimate of uoe info) but 1000 MiB is available (MemAvailable of /proc/meminfo): "
                  "InferenceOptions::batch 80 fits with a tenth to spare (900 MiB). skip it.");
  // two ranks on the machine share MemAvailable (450 MiB each), not a process's own ulimit -v
  msg = error_of([&] { check_memory("train", limits, "TrainOptions::batch", 200, at, 2, "skip"); });
  expect_has(msg, "but 500 MiB is available to each of the 2 ranks on this machine (MemAvailable of /proc/meminfo): "
                  "TrainOptions::batch 35 fits with a tenth to spare (450 MiB)");
  msg = error_of([&] {
    check_memory("sample", {{50 * kMiB, "the free memory of cuda:0", false}}, "InferenceOptions::batch", 1, at, 1,
                 "skip");
  });
  expect_has(msg, "but 50 MiB is available (the free memory of cuda:0): even a batch of 1 needs 110 MiB");
}

// The allocator's peak of what eval does: a checkpoint's tensors read, the model built and loaded, then the
// validation forwards.
double measured_eval_peak(const ModelConfig& c, const std::string& ckpt, const TokenDataset& data, int64_t batch,
                          int64_t seq) {
  Allocator& alloc = allocator_for(Device::cpu());
  alloc.reset_peak();
  const size_t before = alloc.stats().allocated;
  {
    LanguageModel model(c);
    {
      Checkpoint loaded = load_checkpoint(ckpt, OptimizerState::Skip);
      model.load_state_dict(loaded.model, true, ckpt);
    }
    evaluate(model, data, batch, seq, 2);
  }
  return double(alloc.stats().peak - before);
}

TEST(Preflight, TheInferenceEstimateCoversTheEvalPeak) {
  const std::string dir = test::temp_dir("preflight_eval");
  const auto data = test::micro_data(dir);
  // the head's logits lead a dense model's peak, a block's expert activations a UoE model's (micro MoE and AoE
  // measured +10% to +15% as well; the tiny presets at 1 x 64 and 8 x 256, -8% to +3%)
  for (FfnKind kind : {FfnKind::Dense, FfnKind::UoE}) {
    const ModelConfig c = test::micro_config(kind);
    save_checkpoint(dir + "/ckpt", LanguageModel(c), c, nullptr, json::Value::object(), *make_byte_tokenizer());
    for (const auto& [batch, seq] : {std::pair<int64_t, int64_t>{1, 8}, {64, 32}}) {
      const double estimate = estimate_inference_memory(c, {.batch = batch, .seq = seq});
      const double measured = measured_eval_peak(c, dir + "/ckpt", *data, batch, seq);
      // within 10% below (what the preflight lets through runs) to 20% above (what it refuses does not fit)
      EXPECT_GE(estimate, 0.9 * measured) << ffn_kind_name(kind) << " " << batch << " x " << seq;
      EXPECT_LE(estimate, 1.2 * measured) << ffn_kind_name(kind) << " " << batch << " x " << seq;
    }
  }
}

// The commands, on the micro model at a batch of 10^8 rows (terabytes): refused at once on any machine.
class PreflightCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::temp_dir("preflight_cli");
    test::micro_data(dir);
    std::ofstream(dir + "/micro.json") << to_json(test::micro_config(FfnKind::UoE)).dump(2);
  }
  // Runs `uoe <args>`; sets *code.
  std::string uoe(const std::string& args, int* code) const {
    return test::run_command(std::string(UOE_CLI_PATH) + " " + args, code);
  }
  std::string dir;
  // within the --batch x --seq cap of 2^28 tokens per micro-batch, far beyond any machine's memory
  const std::string huge = " --batch 8000000 --seq 32";
};

TEST_F(PreflightCli, ARunFarTooLargeIsRefusedBeforeAnythingIsAllocated) {
  int code = 0;
  std::string out = uoe("train --config " + dir + "/micro.json --data " + dir + "/text.txt --out " + dir + "/big" +
                        huge + " --steps 1 --quiet", &code);
  EXPECT_EQ(code, 1) << out;
  expect_has(out, "uoe train: [train] this run needs about ");
  expect_has(out, " per process at --batch 8000000 (the memory estimate of uoe info) but ");
  expect_has(out, " fits with a tenth to spare (");
  expect_has(out, "Pass --skip-memory-check to start anyway");
  EXPECT_TRUE(test::metric_lines(dir + "/big").empty()) << "nothing was trained";

  out = uoe("train --config " + dir + "/micro.json --data " + dir + "/text.txt --out " + dir + "/run --batch 2 "
            "--seq 16 --steps 1 --eval-batches 1 --quiet", &code);
  ASSERT_EQ(code, 0) << out;
  const std::string ckpt = " --ckpt " + dir + "/run/checkpoint --data " + dir + "/text.txt";
  for (const std::string& command : {std::string("eval"), "analyze --out " + dir + "/report"}) {
    out = uoe(command + ckpt + huge, &code);
    EXPECT_EQ(code, 1) << out;
      expect_has(out, "this run needs about ");
    expect_has(out, " fits with a tenth to spare (");
  }
  // eval's batches hold at most the validation split's windows: started anyway, this one runs
  out = uoe("eval" + ckpt + huge + " --max-batches 1 --skip-memory-check", &code);
  EXPECT_EQ(code, 0) << out;
  expect_has(out, "val loss ");
}

// ulimit -v, in a shell that sets it: a limit of this process alone. Not under AddressSanitizer, which cannot
// start within a limited address space.
TEST_F(PreflightCli, TheAddressSpaceLimitCounts) {
#ifdef __SANITIZE_ADDRESS__
  GTEST_SKIP() << "AddressSanitizer reserves terabytes of address space";
#endif
  int code = 0;
  const std::string out =
      test::run_command("ulimit -v 1500000 && " + std::string(UOE_CLI_PATH) + " train --config " + dir +
                            "/micro.json --data " + dir + "/text.txt --out " + dir + "/big --batch 100000 --seq 32 "
                            "--steps 1 --quiet", &code);
  EXPECT_EQ(code, 1) << out;
  expect_has(out, "(ulimit -v: RLIMIT_AS less the ");
}

}  // namespace
}  // namespace uoe::nn
