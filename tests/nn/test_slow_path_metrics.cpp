// The trainer reports the slow paths (core/slow_paths.h) taken during its run: from the step one is first taken,
// each metrics.jsonl line has a `slow_paths` object of counts since the run started, and stderr gets one warning
// line per kind. The CPU has no slow path of its own, so a one-process communicator counts them as the run goes
// (its all-reduces are the trainer's, one per step).
#include <gtest/gtest.h>

#include <string>

#include "core/communicator.h"
#include "core/slow_paths.h"
#include "fixtures.h"
#include "nn/tokenizer.h"
#include "nn/trainer.h"

namespace uoe::nn {
namespace {

// A LocalCommunicator that counts slow path "test.trainer_a" at the trainer's 2nd step all-reduce and
// "test.trainer_b" at its 3rd (the step's three float64s: loss, stop signal, time limit; the run's checks before
// the first step all-reduce too).
class CountingCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  void all_reduce(const Tensor& t, ReduceOp op) override {
    if (t.numel() == 3 && t.dtype() == DType::Float64) {
      ++steps_;
      if (steps_ == 2) slow_paths::count("test.trainer_a", "a's reason");
      if (steps_ == 3) slow_paths::count("test.trainer_b", "b's reason");
    }
    local_.all_reduce(t, op);
  }
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    return local_.all_reduce_async(t, op);
  }
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    local_.reduce_scatter(input, output, op);
  }
  void all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows) override {
    local_.all_gather(input, output, rows);
  }
  void all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                  const std::vector<int64_t>& recv_rows) override {
    local_.all_to_all(input, send_rows, output, recv_rows);
  }
  void broadcast(const Tensor& t, int root) override { local_.broadcast(t, root); }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int color, int key) override { return local_.split(color, key); }

 protected:
  void abort_all(int) override {}

 private:
  LocalCommunicator local_;
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
