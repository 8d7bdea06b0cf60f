// Shared test fixtures.
#include "fixtures.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>

#include "nn/tokenizer.h"

namespace uoe::test {

std::string temp_dir(const std::string& name) {
  const std::string d = ::testing::TempDir() + "uoe_" + name + "_" + std::to_string(::getpid());
  std::system(("rm -rf '" + d + "' && mkdir -p '" + d + "'").c_str());
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
  c.ffn.shared_width = 32;
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
