// uoe compare: every (kind, seed) run trains in its own process; results.md's mean ± sd over the seeds equals the
// runs' own final validation losses; the chart and every run's plots are written; a bad kind fails before any run;
// a failed run stops the others; --variant and --set ablations with their paired differences, and the balance loss
// of MoE runs.
#include <gtest/gtest.h>
#include <signal.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "analysis/metrics_plot.h"
#include "core/atomic_file.h"
#include "core/json.h"
#include "fixtures.h"
#include "nn/checkpoint.h"
#include "xml_check.h"

namespace uoe {
namespace {

using test::run_command;

// The processes whose command line has an argument containing `text`.
std::vector<pid_t> processes_with(const std::string& text) {
  std::vector<pid_t> found;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    const std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (cmdline.find(text) != std::string::npos) found.push_back(pid_t(std::stol(name)));
  }
  return found;
}

class CompareCli : public ::testing::Test {
 protected:
  void SetUp() override {
    dir = test::temp_dir("compare_cli");
    test::micro_data(dir);
    // --preset-prefix <dir>/micro- names these two JSON configs
    for (nn::FfnKind kind : {nn::FfnKind::Dense, nn::FfnKind::MoE, nn::FfnKind::UoE})
      std::ofstream(dir + "/micro-" + nn::ffn_kind_name(kind)) << nn::to_json(test::micro_config(kind)).dump(2);
  }
  std::string compare(const std::string& flags, int* code) const {
    return run_command(std::string(UOE_CLI_PATH) + " compare --data " + dir + "/text.txt --preset-prefix " + dir +
                           "/micro- " + flags,
                       code);
  }
  // The final validation loss of one run, from its own metrics.jsonl.
  double final_val_loss(const std::string& run, const std::string& out = "out") const {
    const analysis::RunMetrics m = analysis::read_metrics(dir + "/" + out + "/" + run + "/metrics.jsonl");
    double last = NAN;
    for (const analysis::StepMetrics& s : m.steps)
      if (s.val_loss) last = *s.val_loss;
    return last;
  }
  std::string dir;
};

TEST_F(CompareCli, TablesTheSeedsOfEveryKind) {
  int code = 0;
  const std::string out = compare("--archs dense,uoe --seeds 2 --jobs 2 --threads 2 --minutes 5 --steps 4 --batch 2 "
                                  "--seq 16 --eval-every 2 --eval-batches 1 --out " + dir + "/out",
                                  &code);
  ASSERT_EQ(code, 0) << out;
  const std::string md = read_file_bytes(dir + "/out/results.md");
  EXPECT_NE(md.find("2 seed(s) x 5 min per variant, 2 run(s) at a time with 1 thread(s) each, batch 2 x 16"),
            std::string::npos) << md;
  for (const char* kind : {"dense", "uoe"}) {
    const double a = final_val_loss(std::string(kind) + "-seed0"), b = final_val_loss(std::string(kind) + "-seed1");
    ASSERT_TRUE(std::isfinite(a) && std::isfinite(b)) << kind;
    EXPECT_NE(a, b) << kind << ": the two seeds should differ";
    const double mean = (a + b) / 2, sd = std::abs(a - b) / std::sqrt(2.0);
    char row[96];
    std::snprintf(row, sizeof row, "| %s | %.4f ± %.4f |", kind, mean, sd);
    EXPECT_NE(md.find(row), std::string::npos) << row << "\n" << md;
    for (const char* seed : {"-seed0", "-seed1"})
      EXPECT_TRUE(std::filesystem::exists(dir + "/out/" + kind + seed + "/plots/index.html")) << kind << seed;
  }
  // the table is printed too
  EXPECT_NE(out.find("| variant | val loss (nats/token) | Δ vs dense (95% CI) |"), std::string::npos) << out;
  const test::XmlCheck svg = test::check_xml(read_file_bytes(dir + "/out/val_loss.svg"));
  EXPECT_EQ(svg.error, "");
  EXPECT_EQ(svg.find("polyline", "class", "line").size(), 4u) << "a curve per run";
  EXPECT_EQ(md.find("ended runs before"), std::string::npos) << "every run reached --steps\n" << md;
  // The same --out again: refused, unless --overwrite
  const std::string again = "--archs dense --seeds 1 --minutes 5 --steps 2 --batch 2 --seq 16 --eval-batches 1 --out " +
                            dir + "/out";
  std::string msg = compare(again, &code);
  EXPECT_EQ(code, 1) << msg;
  EXPECT_NE(msg.find("already holds a comparison (results.md): add --overwrite"), std::string::npos) << msg;
  msg = compare(again + " --overwrite", &code);
  EXPECT_EQ(code, 0) << msg;
}

// Two --variant ablations of UoE and one of MoE (with the default balance loss): every variant's row holds its mean
// and the paired difference against the first variant, recomputed here from the runs' own losses (t_{0.975, 1} =
// 12.7062); the seeds table lists every run; each run's checkpoint carries its assignments.
TEST_F(CompareCli, VariantsAreTabledWithTheirPairedDifferenceAgainstTheFirst) {
  int code = 0;
  const std::string out = compare("--archs uoe,moe --variant base: --variant r4:ffn.routing_neurons=4 --seeds 2 "
                                  "--jobs 2 --threads 2 --minutes 5 --steps 3 --batch 2 --seq 16 --eval-every 0 "
                                  "--eval-batches 1 --set ffn.top_k=1 --out " + dir + "/ablation",
                                  &code);
  ASSERT_EQ(code, 1) << "ffn.routing_neurons does not apply to MoE\n" << out;
  EXPECT_NE(out.find("[config] the variant moe-r4: ffn.routing_neurons is ignored by ffn.kind moe"), std::string::npos)
      << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/ablation")) << "nothing is started or written";

  const std::string ok = compare("--archs uoe --variant base: --variant r4:ffn.routing_neurons=4,ffn.top_k=1 "
                                 "--seeds 2 --jobs 2 --threads 2 --minutes 5 --steps 3 --batch 2 --seq 16 "
                                 "--eval-every 0 --eval-batches 1 --out " + dir + "/ablation",
                                 &code);
  ASSERT_EQ(code, 0) << ok;
  const std::string md = read_file_bytes(dir + "/ablation/results.md");
  EXPECT_NE(md.find("| variant | val loss (nats/token) | Δ vs uoe-base (95% CI) |"), std::string::npos) << md;
  std::vector<double> base, r4;
  for (const char* seed : {"-seed0", "-seed1"}) {
    base.push_back(final_val_loss("uoe-base" + std::string(seed), "ablation"));
    r4.push_back(final_val_loss("uoe-r4" + std::string(seed), "ablation"));
  }
  const double d0 = r4[0] - base[0], d1 = r4[1] - base[1], mean = (d0 + d1) / 2;
  const double half = 12.7062 * (std::abs(d0 - d1) / std::sqrt(2.0)) / std::sqrt(2.0);
  char delta[64];
  std::snprintf(delta, sizeof delta, "| %+.4f ± %.4f |", mean, half);
  EXPECT_NE(md.find(delta), std::string::npos) << delta << "\n" << md;
  EXPECT_NE(md.find("| uoe-base | " ), std::string::npos) << md;
  EXPECT_NE(md.find("| (reference) |"), std::string::npos) << md;
  char seeds_row[96];
  std::snprintf(seeds_row, sizeof seeds_row, "| uoe-r4 | %.4f | %.4f |", r4[0], r4[1]);
  EXPECT_NE(md.find(seeds_row), std::string::npos) << seeds_row << "\n" << md;
  const nn::ModelConfig trained = nn::checkpoint_config(dir + "/ablation/uoe-r4-seed0/checkpoint");
  EXPECT_EQ(trained.ffn.routing_neurons, 4);
  EXPECT_EQ(trained.ffn.top_k, 1);
  EXPECT_NE(md.find("- uoe-r4: `" + dir + "/micro-uoe` `--set ffn.routing_neurons=4` `--set ffn.top_k=1`"),
            std::string::npos) << md;
}

// MoE runs train with the balance loss α = 0.01 unless --balance-loss (or their own ffn.aux_loss) says otherwise.
TEST_F(CompareCli, MoeRunsTrainWithTheBalanceLoss) {
  int code = 0;
  const std::string out = compare("--archs moe --variant plain: --variant none:ffn.aux_loss=0 --seeds 1 "
                                  "--minutes 5 --steps 1 --batch 2 --seq 16 --eval-every 0 --eval-batches 1 --out " +
                                  dir + "/balance",
                                  &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_DOUBLE_EQ(nn::checkpoint_config(dir + "/balance/moe-plain-seed0/checkpoint").ffn.aux_loss, 0.01);
  EXPECT_DOUBLE_EQ(nn::checkpoint_config(dir + "/balance/moe-none-seed0/checkpoint").ffn.aux_loss, 0.0);
  const std::string md = read_file_bytes(dir + "/balance/results.md");
  EXPECT_NE(md.find("load-balance loss α 0.01 for MoE and AoE"), std::string::npos) << md;
  EXPECT_NE(md.find("| moe-none | "), std::string::npos) << md;
  EXPECT_NE(md.find("± n/a (one seed) |"), std::string::npos) << md;
}

TEST_F(CompareCli, RunsThatTheTimeLimitStopsEarlyAreNamedWithTheirLearningRate) {
  int code = 0;
  // --eval-every 0: one evaluation, at the end, however many steps the machine manages in the time limit
  const std::string out = compare("--archs dense --seeds 1 --minutes 0.01 --steps 1000000 --batch 2 --seq 16 "
                                  "--eval-every 0 --eval-batches 1 --out " + dir + "/early", &code);
  ASSERT_EQ(code, 0) << out;
  const std::string md = read_file_bytes(dir + "/early/results.md");
  EXPECT_NE(md.find("| dense | " ), std::string::npos) << md;
  EXPECT_NE(md.find(" ± n/a (one seed) |"), std::string::npos) << "one seed has no spread\n" << md;
  EXPECT_NE(out.find("runs done 1/1"), std::string::npos) << "the overall progress reaches its end: " << out;
  // the run evaluated at its end: its curve is that one point, marked inside the chart
  const test::XmlCheck svg = test::check_xml(read_file_bytes(dir + "/early/val_loss.svg"));
  EXPECT_EQ(svg.find("circle", "class", "point").size(), 1u);
  EXPECT_NE(md.find("`--minutes` ended runs before `--steps 1000000`, part-way down the learning-rate schedule: "
                    "dense seed 0 at step "), std::string::npos) << md;
  const std::string log = read_file_bytes(dir + "/early/dense-seed0/train.log");
  EXPECT_NE(log.find("of --steps 1000000, with the learning rate still at"), std::string::npos) << log;
}

TEST_F(CompareCli, ABadKindFailsBeforeAnyRun) {
  int code = 0;
  const std::string out = compare("--archs dense,bogus --out " + dir + "/bad", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("uoe compare: [config]"), std::string::npos) << out;
  EXPECT_NE(out.find("micro-bogus"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/bad")) << "nothing is started or written";
}

TEST_F(CompareCli, AWindowLongerThanAKindsContextFailsBeforeAnyRun) {
  int code = 0;
  const std::string out = compare("--archs dense,uoe --seq 64 --out " + dir + "/long", &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("--seq 64 exceeds the context 32 of " + dir + "/micro-dense"), std::string::npos) << out;
  EXPECT_FALSE(std::filesystem::exists(dir + "/long")) << "nothing is started or written";
}

TEST_F(CompareCli, AFailedRunStopsTheOthers) {
  // A valid configuration (within nn/config.h's bounds) whose `uoe train` fails at once: its 2^24 x 2^16 embedding
  // (4 TiB) cannot be allocated
  nn::ModelConfig huge = test::micro_config(nn::FfnKind::Dense);
  huge.vocab_size = nn::kMaxVocab;
  huge.d_model = nn::kMaxWidth;
  std::ofstream(dir + "/micro-huge") << nn::to_json(huge).dump(2);
  int code = 0;
  const std::string out = compare("--archs dense,huge --seeds 1 --jobs 2 --threads 2 --minutes 5 --steps 1000000 "
                                  "--batch 2 --seq 16 --out " + dir + "/failed",
                                  &code);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("the run huge seed 0 failed (see " + dir + "/failed/huge-seed0/train.log)"), std::string::npos)
      << out;
  // compare stopped the dense run and waited for it: no process trains into its directory any more
  const std::vector<pid_t> left = processes_with(dir + "/failed/dense-seed0");
  for (pid_t pid : left) ::kill(pid, SIGKILL);
  EXPECT_TRUE(left.empty()) << left.size() << " run(s) still training after compare exited";
}

}  // namespace
}  // namespace uoe
