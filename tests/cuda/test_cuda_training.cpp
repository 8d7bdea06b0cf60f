// nn::train on a GPU end to end, every FFN kind, bf16 compute over float32 master weights (and with activation
// checkpointing, and bf16 parameter storage): the losses fall as on the CPU, the routing statistics are read,
// TF32 is on for the run and put back after, and a checkpoint written from the GPU loads. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "core/json.h"
#include "cuda/cuda_api.h"
#include "fixtures.h"
#include "nn/checkpoint.h"
#include "nn/trainer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

class CudaTraining : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): GPU training skipped";
  }
};

TEST_F(CudaTraining, EveryKindLearnsInBf16OnTheGpu) {
  const std::string dir = test::temp_dir("cuda_train");
  auto data = test::micro_data(dir);
  auto tok = make_byte_tokenizer();
  struct Setting {
    FfnKind kind;
    bool checkpoint;
    DType params;
  };
  for (const Setting& c : std::vector<Setting>{{FfnKind::Dense, false, DType::Float32},
                                               {FfnKind::MoE, false, DType::Float32},
                                               {FfnKind::AoE, false, DType::Float32},
                                               {FfnKind::UoE, false, DType::Float32},
                                               {FfnKind::UoE, true, DType::Float32},
                                               {FfnKind::UoE, false, DType::BFloat16}}) {
    const std::string name = std::string(ffn_kind_name(c.kind)) + (c.checkpoint ? "_ckpt" : "") +
                             (c.params == DType::BFloat16 ? "_bf16_params" : "");
    TrainOptions o = test::micro_train_options(dir + "/" + name, 30);
    o.device = Device::cuda(0);
    o.compute_dtype = DType::BFloat16;
    o.checkpoint_activations = c.checkpoint;
    o.param_dtype = c.params;
    const bool tf32_before = ops::allow_tf32();
    const TrainResult r = train(test::micro_config(c.kind), o, *data, *tok);
    EXPECT_EQ(ops::allow_tf32(), tf32_before) << name << ": the run must put TF32 back";
    const std::vector<json::Value> lines = test::metric_lines(o.out_dir);
    ASSERT_EQ(lines.size(), 30u) << name;
    const double first = lines.front().at("train_loss").as_double(), last = lines.back().at("train_loss").as_double();
    EXPECT_TRUE(std::isfinite(last)) << name;
    EXPECT_LT(last, first - 1.0) << name << ": the loss must fall as on the CPU";
    EXPECT_GT(r.final_val_loss, 0.0) << name;
    EXPECT_GT(lines.back().at("peak_memory_mib").as_double(), 0.0) << name;
    if (c.kind != FfnKind::Dense) {
      double total = 0;
      for (const json::Value& f : lines.back().at("layers").as_array()[0].at("load").as_array()) total += f.as_double();
      EXPECT_NEAR(total, 1.0, 1e-9) << name;
    }
    EXPECT_EQ(load_checkpoint(o.out_dir + "/checkpoint").trainer_state.at("step").as_int(), 30) << name;
  }
}

// The switches the run above leaves at their defaults, on the GPU in bf16: UoE's full_expert combine (its mask of
// unselected experts) with top-p routing and the load-balance loss, MoE's load-balance and router z-losses through
// activation checkpointing, AoE's full-softmax weights under SGD with gradient accumulation, and a run resumed from
// the checkpoint a GPU run wrote.
TEST_F(CudaTraining, RouterLossesSwitchesAndResumeOnTheGpu) {
  const std::string dir = test::temp_dir("cuda_train_switches");
  auto data = test::micro_data(dir);
  auto tok = make_byte_tokenizer();
  auto options = [&](const std::string& name, int64_t steps) {
    TrainOptions o = test::micro_train_options(dir + "/" + name, steps);
    o.device = Device::cuda(0);
    o.compute_dtype = DType::BFloat16;
    return o;
  };
  auto check = [](const std::string& name, const TrainOptions& o, size_t steps) {
    const std::vector<json::Value> lines = test::metric_lines(o.out_dir);
    ASSERT_EQ(lines.size(), steps) << name;
    const double first = lines.front().at("train_loss").as_double(), last = lines.back().at("train_loss").as_double();
    EXPECT_TRUE(std::isfinite(last) && std::isfinite(lines.back().at("grad_norm").as_double())) << name;
    EXPECT_LT(last, first - 0.5) << name << ": the loss must fall";
  };
  {
    ModelConfig c = test::micro_config(FfnKind::UoE);
    c.ffn.combine = Combine::FullExpert;
    c.ffn.routing = Routing::TopP;
    c.ffn.aux_loss = 0.01;
    const TrainOptions o = options("uoe_full_expert_topp", 30);
    train(c, o, *data, *tok);
    check("uoe_full_expert_topp", o, 30);
  }
  {
    ModelConfig c = test::micro_config(FfnKind::MoE);
    c.ffn.aux_loss = 0.01;
    c.ffn.z_loss = 0.001;
    TrainOptions o = options("moe_router_losses_ckpt", 30);
    o.checkpoint_activations = true;
    train(c, o, *data, *tok);
    check("moe_router_losses_ckpt", o, 30);
  }
  {
    ModelConfig c = test::micro_config(FfnKind::AoE);
    c.ffn.weights = ops::RouteWeights::FullSoftmax;
    TrainOptions o = options("aoe_sgd_accum", 30);
    o.optimizer = "sgd";
    o.lr = 0.3;  // as the CPU's SGD test
    o.grad_accum = 2;
    train(c, o, *data, *tok);
    check("aoe_sgd_accum", o, 30);
  }
  {
    const ModelConfig c = test::micro_config(FfnKind::UoE);
    TrainOptions o = options("uoe_resume", 10);
    o.param_dtype = DType::BFloat16;
    train(c, o, *data, *tok);
    o.steps = 20;
    o.resume = true;
    o.allow_change = {"steps"};
    const TrainResult r = train(c, o, *data, *tok);
    EXPECT_EQ(r.steps, 20);
    EXPECT_TRUE(std::isfinite(r.final_val_loss) && r.final_val_loss > 0.0);
    const std::vector<json::Value> lines = test::metric_lines(o.out_dir);
    ASSERT_EQ(lines.size(), 20u);
    EXPECT_EQ(lines.back().at("step").as_int(), 20);
    EXPECT_TRUE(std::isfinite(lines.back().at("train_loss").as_double()));
    EXPECT_EQ(load_checkpoint(o.out_dir + "/checkpoint").trainer_state.at("step").as_int(), 20);
  }
}

// `uoe eval` and `uoe sample` on the GPU: the validation loss of a CPU-trained checkpoint agrees with the CPU's
// (float32 to 1e-4, bfloat16 compute to 2e-2), and greedy sampling runs in both dtypes.
TEST_F(CudaTraining, CliEvalAndSampleOnTheGpu) {
#ifdef UOE_CLI_PATH
  const std::string dir = test::temp_dir("cuda_cli");
  auto data = test::micro_data(dir);
  auto tok = make_byte_tokenizer();
  const TrainOptions o = test::micro_train_options(dir + "/run", 10);  // trained on the CPU
  train(test::micro_config(FfnKind::UoE), o, *data, *tok);
  const std::string eval = std::string(UOE_CLI_PATH) + " eval --ckpt " + o.out_dir + "/checkpoint --data " + dir +
                           "/text.txt --seq 32 --max-batches 4";
  auto nats = [&](const std::string& flags) {
    int code = 0;
    const std::string out = test::run_command(eval + flags, &code);
    EXPECT_EQ(code, 0) << flags << ": " << out;
    return std::stod(out.substr(out.find("val loss ") + 9));
  };
  const double cpu = nats(""), gpu = nats(" --device cuda"), gpu_bf16 = nats(" --device cuda --dtype bf16");
  EXPECT_NEAR(gpu, cpu, 1e-4 * cpu);
  EXPECT_NEAR(gpu_bf16, cpu, 2e-2 * cpu);
  for (const char* dtype : {"f32", "bf16"}) {
    int code = 0;
    const std::string out = test::run_command(std::string(UOE_CLI_PATH) + " sample --ckpt " + o.out_dir +
                                                  "/checkpoint --prompt 'the quick' --tokens 16 --temperature 0 " +
                                                  "--device cuda --dtype " + dtype, &code);
    EXPECT_EQ(code, 0) << dtype << ": " << out;
    EXPECT_EQ(out.rfind("the quick", 0), 0u) << dtype << ": " << out;
  }
#else
  GTEST_SKIP() << "built without the uoe program";
#endif
}

}  // namespace
}  // namespace uoe::nn
