// Shared test fixtures.
#include "fixtures.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "nn/tokenizer.h"

namespace uoe::test {

namespace {

// The directories temp_dir made in this process. At exit they are removed, unless a test failed: then they
// stay for inspection, and their paths are printed. A forked child that exits leaves them to its parent.
std::vector<std::string>& made_dirs() {
  static std::vector<std::string> dirs;
  return dirs;
}
pid_t made_dirs_owner = 0;

void remove_made_dirs() {
  if (::getpid() != made_dirs_owner) return;
  const bool failed = ::testing::UnitTest::GetInstance()->Failed();
  for (const std::string& d : made_dirs()) {
    if (failed) {
      std::fprintf(stderr, "a test failed: kept its directory %s\n", d.c_str());
    } else {
      std::error_code ignored;
      std::filesystem::remove_all(d, ignored);
    }
  }
}

}  // namespace

std::string temp_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "uoe_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  if (made_dirs().empty()) {
    made_dirs_owner = ::getpid();
    std::atexit(remove_made_dirs);
  }
  if (std::find(made_dirs().begin(), made_dirs().end(), d) == made_dirs().end()) made_dirs().push_back(d);
  return d;
}

nn::ModelConfig micro_config(nn::FfnKind kind) {
  nn::ModelConfig c;
  c.name = "micro";
  c.d_model = 32;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.context = 32;
  c.ffn.kind = kind;
  c.ffn.hidden = 64;
  c.ffn.n_experts = 4;
  c.ffn.top_k = 2;
  c.ffn.expert_width = 32;
  c.ffn.routing_neurons = 8;
  c.ffn.shared_width = kind == nn::FfnKind::MoE ? 32 : 0;  // AoE can have one too; these tests keep it plain
  c.ffn.d_low = 11;
  return c;
}

std::shared_ptr<nn::TokenDataset> micro_data(const std::string& dir) {
  std::string text;
  for (int i = 0; i < 3000; ++i) text += "the quick brown fox " + std::to_string(i % 17) + " jumps; ";
  std::ofstream(dir + "/text.txt") << text;
  auto tok = nn::make_byte_tokenizer();
  nn::prepare_tokens(dir + "/text.txt", *tok, dir + "/tokens.bin");
  return std::make_shared<nn::TokenDataset>(std::make_shared<nn::TokenFile>(dir + "/tokens.bin"));
}

std::string run_command(const std::string& cmd, int* code) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) out.append(buf, n);
  const int status = ::pclose(p);
  *code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

nn::TrainOptions micro_train_options(const std::string& out, int64_t steps) {
  nn::TrainOptions o;
  o.steps = steps;
  o.batch = 4;
  o.seq = 32;
  o.lr = 3e-3;
  o.warmup = 2;
  o.eval_every = 0;
  o.eval_batches = 2;
  o.progress = false;
  o.out_dir = out;
  return o;
}

std::vector<json::Value> metric_lines(const std::string& out) {
  std::vector<json::Value> lines;
  std::ifstream in(out + "/metrics.jsonl");
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.push_back(json::parse(line));
  return lines;
}

}  // namespace uoe::test
