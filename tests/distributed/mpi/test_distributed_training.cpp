// nn::train across the ranks of mpirun: the same losses as one process with the same global batch, rank 0 alone
// writing, and a ZeRO-1 checkpoint saved at N ranks resuming at N (bit for bit) and at one rank.
#include <gtest/gtest.h>

#include <filesystem>

#include "core/allocator.h"
#include "core/json.h"
#include "dist_helpers.h"
#include "fixtures.h"
#include "nn/accounting.h"
#include "nn/checkpoint.h"
#include "nn/trainer.h"

namespace uoe::nn {
namespace {

TrainOptions options(const std::string& out, int64_t steps, bool zero1, int64_t expert_parallel = 1) {
  TrainOptions o;
  o.steps = steps;
  o.batch = 4;
  o.seq = 32;
  o.lr = 3e-3;
  o.min_lr = 3e-3;  // a constant rate: a run may stop early and be resumed with more steps
  o.warmup = 0;
  o.eval_every = 3;
  o.eval_batches = 3;
  o.progress = false;
  o.out_dir = out;
  o.zero1 = zero1;
  o.expert_parallel = expert_parallel;
  o.bucket_bytes = 4096;
  return o;
}

std::vector<json::Value> metrics(const std::string& out) { return test::metric_lines(out); }

void expect_close_losses(const std::vector<json::Value>& a, const std::vector<json::Value>& b, double tol) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i)
    for (const char* key : {"train_loss", "val_loss", "grad_norm"}) {
      ASSERT_EQ(a[i].contains(key), b[i].contains(key)) << key;
      if (!a[i].contains(key)) continue;
      const double x = a[i].at(key).as_double(), y = b[i].at(key).as_double();
      EXPECT_NEAR(x, y, tol * std::abs(y)) << key << " at step " << i + 1;
    }
}

struct Fixture {
  std::string dir;
  std::shared_ptr<TokenDataset> data;
  std::unique_ptr<Tokenizer> tok = make_byte_tokenizer();
};

Fixture setup(const std::string& name) {
  Fixture f;
  f.dir = test::shared_dir(name);
  if (world().rank() == 0) test::micro_data(f.dir);
  world().barrier();
  f.data = std::make_shared<TokenDataset>(std::make_shared<TokenFile>(f.dir + "/tokens.bin"));
  return f;
}

// Trains each kind on world() with the experts split across pairs of ranks (with and without ZeRO-1) and, on
// rank 0, expects the losses of one process on the same global batch.
void expect_expert_parallel_follows_one_process(const Fixture& f, const std::vector<FfnKind>& kinds) {
  for (FfnKind kind : kinds)
    for (bool zero1 : {false, true}) {
      const ModelConfig config = test::micro_config(kind);
      const std::string name = std::string(ffn_kind_name(kind)) + (zero1 ? "_zero" : "");
      const TrainResult r = train(config, options(f.dir + "/ep_" + name, 6, zero1, 2), *f.data, *f.tok);
      EXPECT_EQ(r.steps, 6);
      if (world().rank() == 0) {
        LocalCommunicator one;
        train(config, options(f.dir + "/single_" + name, 6, false), *f.data, *f.tok, one);
        expect_close_losses(metrics(f.dir + "/ep_" + name), metrics(f.dir + "/single_" + name), 2e-5);
      }
      world().barrier();
    }
}

TEST(DistributedTraining, DataParallelMatchesOneProcessWithTheSameBatch) {
  const Fixture f = setup("dist_train");
  const ModelConfig config = test::micro_config(FfnKind::UoE);
  for (bool zero1 : {false, true}) {
    const std::string dp = f.dir + (zero1 ? "/zero" : "/dp");
    const TrainResult r = train(config, options(dp, 6, zero1), *f.data, *f.tok);
    EXPECT_EQ(r.steps, 6);
    if (world().rank() != 0) continue;
    LocalCommunicator one;
    const std::string single = f.dir + "/single" + (zero1 ? "_zero" : "");
    train(config, options(single, 6, false), *f.data, *f.tok, one);
    expect_close_losses(metrics(dp), metrics(single), 2e-5);  // also: one line per step (rank 0 alone writes)
    const Checkpoint a = load_checkpoint(dp + "/checkpoint"), b = load_checkpoint(single + "/checkpoint");
    ASSERT_EQ(a.optimizer.size(), b.optimizer.size());
    for (const auto& [name, t] : b.optimizer) EXPECT_EQ(a.optimizer.at(name).shape(), t.shape()) << name;
  }
  world().barrier();
}

TEST(DistributedTraining, ExpertParallelMatchesOneProcessForEveryExpertKind) {
  const Fixture f = setup("ep_train");
  expect_expert_parallel_follows_one_process(f, {FfnKind::MoE, FfnKind::AoE, FfnKind::UoE});
}

TEST(DistributedTraining, Bf16ParametersFollowOneProcessAndZeroRoundsAlike) {
  // bfloat16 parameters: gradients summed in float32 buckets; ZeRO-1 shards round each element exactly as the
  // whole parameter does (the rounding is keyed by the element's index), so ZeRO-1 equals plain data parallel.
  const Fixture f = setup("bf16_train");
  const ModelConfig config = test::micro_config(FfnKind::MoE);
  auto bf16 = [](TrainOptions o) {
    o.param_dtype = DType::BFloat16;
    o.compute_dtype = DType::BFloat16;
    return o;
  };
  train(config, bf16(options(f.dir + "/dp", 6, false)), *f.data, *f.tok);
  train(config, bf16(options(f.dir + "/zero", 6, true)), *f.data, *f.tok);
  if (world().rank() == 0) {
    expect_close_losses(metrics(f.dir + "/zero"), metrics(f.dir + "/dp"), 0);
    LocalCommunicator one;
    train(config, bf16(options(f.dir + "/single", 6, false)), *f.data, *f.tok, one);
    expect_close_losses(metrics(f.dir + "/dp"), metrics(f.dir + "/single"), 2e-2);
  }
  world().barrier();
}

TEST(DistributedTraining, MemoryEstimateHoldsForDataAndExpertParallel) {
  // The trainer's peak_memory_mib on rank 0 against `uoe info`'s estimate for 2 ranks: gradient buckets, ZeRO-1
  // shards, each rank's part of the experts and the exchanged pairs (which outweigh the rest at the larger batch).
  const Fixture f = setup("memory_train");
  struct Setting {
    const char* preset;
    int64_t ep;
    bool zero1;
    int64_t batch, seq;
  };
  const std::vector<Setting> settings = {
      {"tiny-uoe", 1, false, 4, 64},   {"tiny-uoe", 1, true, 4, 64},    {"tiny-uoe", 2, false, 4, 64},
      {"tiny-uoe", 2, true, 4, 64},    {"tiny-uoe", 2, false, 16, 256}, {"tiny-moe", 2, false, 16, 256},
      {"tiny-aoe", 2, false, 16, 256}, {"tiny-aoe", 2, true, 4, 64}};
  for (const Setting& c : settings) {
    const ModelConfig config = load_model_config(c.preset);
    const std::string name = std::string(c.preset) + " ep " + std::to_string(c.ep) + (c.zero1 ? " zero1" : "") +
                             " batch " + std::to_string(c.batch) + " x " + std::to_string(c.seq);
    const std::string out = f.dir + "/" + std::to_string(&c - settings.data());
    TrainOptions o = options(out, 2, c.zero1, c.ep);
    o.batch = c.batch;
    o.seq = c.seq;
    o.save_at_end = false;  // (checkpoints of tiny models at 8 settings: over a gigabyte nobody reads)
    allocator_for(Device::cpu()).reset_peak();  // from here: this run's peak
    train(config, o, *f.data, *f.tok);
    if (world().rank() != 0) continue;
    MemoryOptions m;
    m.batch = o.batch / 2;
    m.seq = o.seq;
    m.ranks = 2;
    m.zero1 = c.zero1;
    m.expert_parallel = c.ep;
    const double estimate = estimate_training_memory(config, m).total / double(1 << 20);
    const double measured = metrics(out).back().at("peak_memory_mib").as_double();
    // The bar is 10%. Since expert_ffn keeps H_g, H_p for its backward, tiny-moe with ep 2 at 16 x 256 measures
    // 9.6% above the estimate (the others within 3%): its measured peak grew by 91 MiB, the estimate by the 64 MiB
    // of the kept activations.
    EXPECT_LT(std::abs(estimate - measured) / measured, 0.10)
        << name << ": estimate " << estimate << " MiB, measured " << measured;
  }
  world().barrier();
}

TEST(DistributedTraining, ExpertParallelRejectsWhatItCannotSplit) {
  const Fixture f = setup("ep_errors");
  auto message = [&](const ModelConfig& c, TrainOptions o) {
    try {
      train(c, o, *f.data, *f.tok);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  TrainOptions o = options(f.dir + "/bad", 1, false, 2);
  EXPECT_NE(message(test::micro_config(FfnKind::Dense), o).find("has a dense FFN"), std::string::npos);
  o.expert_parallel = 3;
  EXPECT_NE(message(test::micro_config(FfnKind::UoE), o).find("expert_parallel 3 must divide the 2 ranks"),
            std::string::npos);
  o.expert_parallel = 2;
  o.batch = 5;
  EXPECT_NE(message(test::micro_config(FfnKind::MoE), o).find("to split evenly across the 2 ranks"),
            std::string::npos);
}

TEST(DistributedTraining, ZeroCheckpointResumesAtTheSameAndAtOneRank) {
  // Also with the experts split across the 2 ranks: the checkpoint holds every expert, gathered.
  const Fixture f = setup("dist_resume");
  const ModelConfig config = test::micro_config(FfnKind::UoE);
  for (int64_t ep : {1, 2}) {
    const std::string run = f.dir + "/ep" + std::to_string(ep);
    const std::string straight = run + "/straight", split = run + "/split", single = run + "/single";
    train(config, options(straight, 5, true, ep), *f.data, *f.tok);
    train(config, options(split, 3, true, ep), *f.data, *f.tok);
    if (world().rank() == 0) std::filesystem::copy(split, single, std::filesystem::copy_options::recursive);
    world().barrier();
    TrainOptions resume = options(split, 5, true, ep);
    resume.resume = true;
    resume.allow_change = {"steps"};  // a constant learning rate: the schedule does not depend on --steps
    train(config, resume, *f.data, *f.tok);
    if (world().rank() == 0) {
      const auto want = metrics(straight), got = metrics(split);
      ASSERT_EQ(got.size(), 5u);
      for (size_t i = 0; i < want.size(); ++i)  // the same rank count: bit for bit
        EXPECT_EQ(got[i].at("train_loss").as_double(), want[i].at("train_loss").as_double()) << "step " << i + 1;
      const Checkpoint c = load_checkpoint(split + "/checkpoint");
      const LanguageModel whole(config);
      for (const auto& [name, t] : whole.state_dict()) EXPECT_EQ(c.model.at(name).shape(), t.shape()) << name;
      LocalCommunicator one;
      TrainOptions at_one = options(single, 5, false);
      at_one.resume = true;
      at_one.allow_change = {"steps"};
      train(config, at_one, *f.data, *f.tok, one);
      expect_close_losses(metrics(single), want, 2e-5);
    }
    world().barrier();
  }
}

// ---- under mpirun -np 4 (ctest distributed.FourRanks) -------------------------------------------------------
// Experts split across pairs of ranks {0, 1} and {2, 3}: each expert slice is held by two replicas, whose
// data-parallel buckets and ZeRO-1 shards run over their own group.

TEST(FourRanks, ExpertGroupsOfTwoWithReplicasFollowOneProcess) {
  ASSERT_EQ(world().size(), 4) << "run under mpirun -np 4";
  const Fixture f = setup("four_ep");
  expect_expert_parallel_follows_one_process(f, {FfnKind::MoE, FfnKind::UoE});
}

TEST(FourRanks, ExpertParallelCheckpointResumesOnTwoRanksAndOne) {
  ASSERT_EQ(world().size(), 4) << "run under mpirun -np 4";
  const Fixture f = setup("four_resume");
  const ModelConfig config = test::micro_config(FfnKind::UoE);
  const std::string straight = f.dir + "/straight", split = f.dir + "/split", single = f.dir + "/single";
  train(config, options(straight, 5, true, 2), *f.data, *f.tok);
  train(config, options(split, 3, true, 2), *f.data, *f.tok);  // saved at 4 ranks, experts split in pairs
  if (world().rank() == 0) std::filesystem::copy(split, single, std::filesystem::copy_options::recursive);
  // Ranks 0 and 1 resume it alone, still splitting the experts; ranks 2 and 3 sit out.
  const std::unique_ptr<Communicator> pair = world().split(world().rank() < 2 ? 0 : 1, world().rank());
  if (world().rank() < 2) {
    TrainOptions resume = options(split, 5, true, 2);
    resume.resume = true;
    resume.allow_change = {"steps"};  // a constant learning rate: the schedule does not depend on --steps
    train(config, resume, *f.data, *f.tok, *pair);
  }
  if (world().rank() == 0) {
    expect_close_losses(metrics(split), metrics(straight), 2e-5);
    LocalCommunicator one;
    TrainOptions at_one = options(single, 5, false);
    at_one.resume = true;
    at_one.allow_change = {"steps"};
    train(config, at_one, *f.data, *f.tok, one);
    expect_close_losses(metrics(single), metrics(straight), 2e-5);
  }
  world().barrier();
}

}  // namespace
}  // namespace uoe::nn
