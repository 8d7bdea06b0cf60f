// The trainer reports the slow paths (core/slow_paths.h) taken during its run: from the step one is first taken,
// each metrics.jsonl line has a `slow_paths` object of counts since the run started, and stderr gets one warning
// line per kind. The CPU has no slow path of its own, so a one-process communicator counts them as the run goes
// (its all-reduces are the trainer's, one per step).
#include <gtest/gtest.h>

#include <string>

#include "core/communicator.h"
#include "core/slow_paths.h"
#include "fixtures.h"
#include "forwarding_communicator.h"
#include "nn/tokenizer.h"
#include "nn/trainer.h"

namespace uoe::nn {
namespace {

// A LocalCommunicator that counts slow path "test.trainer_a" at the trainer's 2nd step all-reduce and
// "test.trainer_b" at its 3rd (the step's three float64s: loss, stop signal, time limit; the run's checks before
// the first step all-reduce too).
class CountingCommunicator final : public test::ForwardingCommunicator {
 public:
  void all_reduce(const Tensor& t, ReduceOp op) override {
    if (t.numel() == 3 && t.dtype() == DType::Float64) {
      ++steps_;
      if (steps_ == 2) slow_paths::count("test.trainer_a", "a's reason");
      if (steps_ == 3) slow_paths::count("test.trainer_b", "b's reason");
    }
    ForwardingCommunicator::all_reduce(t, op);
  }

 private:
  int steps_ = 0;
};

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(SlowPathMetrics, LinesCountTheRunsSlowPathsAndEachKindWarnsOnce) {
  const std::string dir = test::temp_dir("slow_paths");
  auto data = test::micro_data(dir);
  auto tok = make_byte_tokenizer();
  slow_paths::count("test.trainer_a", "a's reason");  // before the run: not counted in it
  CountingCommunicator comm;
  testing::internal::CaptureStderr();
  train(test::micro_config(FfnKind::MoE), test::micro_train_options(dir + "/run", 4), *data, *tok, comm);
  const std::string err = testing::internal::GetCapturedStderr();

  const std::vector<json::Value> lines = test::metric_lines(dir + "/run");
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_FALSE(lines[0].contains("slow_paths"));  // none taken yet
  EXPECT_EQ(lines[1].at("slow_paths"), json::parse(R"({"test.trainer_a": 1})"));
  for (size_t i : {2, 3}) EXPECT_EQ(lines[i].at("slow_paths"), json::parse(R"({"test.trainer_a": 1, "test.trainer_b": 1})"));
  EXPECT_EQ(occurrences(err, "[train] warning: slow path test.trainer_a: a's reason\n"), 1u) << err;
  EXPECT_EQ(occurrences(err, "[train] warning: slow path test.trainer_b: b's reason\n"), 1u) << err;
  EXPECT_EQ(occurrences(err, "slow path"), 2u) << err;
}

}  // namespace
}  // namespace uoe::nn
