// The seed corpus, written by save_checkpoint and write_token_file into a scratch directory and read back.
#include "corpus.h"

#include <filesystem>

#include "core/atomic_file.h"
#include "core/error.h"
#include "nn/checkpoint.h"
#include "nn/dataset.h"
#include "scratch.h"

namespace uoe::fuzz {
namespace {

// A made-up text for the BPE seed (no third-party data).
constexpr const char* kText =
    "the fuzzer feeds the reader odd bytes, and the reader names the field it rejects. "
    "the fuzzer feeds the reader odd numbers, and the reader names the number it rejects.";

// Integers first, first + 1, ... of `dtype` in `shape` (BOOL: alternating 0 and 1).
Tensor counting(const Shape& shape, DType dtype, double first = 0) {
  std::vector<double> values(size_t(shape_numel(shape)));
  for (size_t i = 0; i < values.size(); ++i) values[i] = dtype == DType::Bool ? double(i % 2) : first + double(i);
  return from_vector(values, shape).to(dtype);
}

struct CheckpointSeed {
  nn::ModelConfig config;
  nn::NamedTensors model, optimizer;
  json::Value trainer_state;
  std::unique_ptr<nn::Tokenizer> tokenizer;
};

// A small UoE checkpoint with a byte tokenizer; its tensors cover every safetensors dtype, a 0-dim and an empty
// tensor, and its optimizer state holds the 0-dim int64 step the loader checks.
CheckpointSeed first_checkpoint() {
  CheckpointSeed s;
  s.config.name = "fuzz-uoe";
  s.config.d_model = 8;
  s.config.n_layers = 1;
  s.config.n_heads = 2;
  s.config.n_kv_heads = 1;
  s.config.context = 16;
  s.config.ffn.n_experts = 4;
  s.config.ffn.expert_width = 8;
  nn::resolve_defaults(s.config);
  s.model = {{"embed.weight", counting({4, 3}, DType::Float32)}, {"layers.0.norm.weight", counting({3}, DType::BFloat16)},
             {"layers.0.ffn.up", counting({2, 2}, DType::Float16)}, {"scale", counting({}, DType::Float64)},
             {"counts", counting({2}, DType::Int32)},             {"positions", counting({3}, DType::Int64)},
             {"mask", counting({2, 2}, DType::Bool)},             {"unused", counting({0, 3}, DType::Float32)}};
  s.optimizer = {{"step", counting({}, DType::Int64, 3)},
                 {"embed.weight.exp_avg", counting({4, 3}, DType::Float32)},
                 {"embed.weight.exp_avg_sq", counting({4, 3}, DType::Float32)}};
  json::Value& t = s.trainer_state;
  t["step"] = 3;
  t["tokens_seen"] = 384;
  t["seed"] = 1234;
  t["data_cursor"] = 3;
  t["rng"]["seed"] = 42;
  t["rng"]["offset"] = 96;
  t["lr"] = 0.003;
  t["warmup"] = 2;
  t["total_steps"] = 10;
  s.tokenizer = nn::make_byte_tokenizer();
  return s;
}

// A MoE checkpoint with a BPE tokenizer, bf16 parameters, float64 moments, a seed above INT64_MAX and init_from.
CheckpointSeed second_checkpoint() {
  CheckpointSeed s;
  s.config = first_checkpoint().config;
  s.config.name = "fuzz-moe";
  s.config.tied_embeddings = false;
  s.config.ffn.kind = nn::FfnKind::MoE;
  s.config.ffn.shared_width = 4;
  s.config.ffn.aux_loss = 0.01;
  s.tokenizer = nn::train_bpe(kText, 280);
  s.config.vocab_size = s.tokenizer->vocab_size();
  s.model = {{"embed.weight", counting({3, 2}, DType::BFloat16)}, {"head.weight", counting({2, 3}, DType::BFloat16)}};
  s.optimizer = {{"step", counting({}, DType::Int64, 7)}, {"embed.weight.exp_avg", counting({3, 2}, DType::Float64)}};
  json::Value& t = s.trainer_state;
  t["step"] = 7;
  t["tokens_seen"] = 896;
  t["seed"] = uint64_t(18000000000000000000ull);
  t["init_from"] = "runs/base/checkpoint";
  t["data_cursor"] = 14;
  t["rng"]["seed"] = 5;
  t["rng"]["offset"] = 0;
  t["lr"] = 2.5e-4;
  t["warmup"] = 0;
  t["total_steps"] = 100;
  return s;
}

void save(const CheckpointSeed& s, const std::string& dir) {
  nn::save_checkpoint(dir, s.model, s.config, s.optimizer, s.trainer_state, *s.tokenizer);
}

}  // namespace

std::vector<SeedFile> seed_corpus() {
  const ScratchDir scratch("corpus");
  const std::string& dir = scratch.path();
  std::vector<SeedFile> seeds;
  const auto add = [&](const std::string& format, const std::string& name, const std::string& path) {
    seeds.push_back({format, name, read_file_bytes(path)});
  };
  const CheckpointSeed checkpoints[] = {first_checkpoint(), second_checkpoint()};
  const char* tags[] = {"uoe", "moe"};
  for (size_t i = 0; i < std::size(checkpoints); ++i) {
    const std::string ckpt = dir + "/" + tags[i];
    save(checkpoints[i], ckpt);
    add("safetensors", std::string(tags[i]) + ".safetensors", ckpt + "/model.safetensors");
    add("optimizer", std::string(tags[i]) + ".safetensors", ckpt + "/optimizer.safetensors");
    add("config", std::string(tags[i]) + ".json", ckpt + "/config.json");
    add("trainer_state", std::string(tags[i]) + ".json", ckpt + "/trainer_state.json");
    add("tokenizer", std::string(i == 0 ? "byte" : "bpe") + ".json", ckpt + "/tokenizer.json");
  }
  const std::unique_ptr<nn::Tokenizer> bpe = nn::train_bpe(kText, 280);
  nn::write_token_file(dir + "/bpe.tok", bpe->encode(kText), bpe->vocab_size());
  add("token_file", "bpe-2byte-ids.tok", dir + "/bpe.tok");
  std::vector<int32_t> wide = {0, 65535, 65536, 69999};  // ids on both sides of 2-byte ids' range, then more
  for (int32_t i = 1; i <= 36; ++i) wide.push_back(i * 1931 % 70000);
  nn::write_token_file(dir + "/wide.tok", wide, 70000);
  add("token_file", "wide-4byte-ids.tok", dir + "/wide.tok");
  return seeds;
}

std::vector<std::string> seeds_of(const std::string& format) {
  std::vector<std::string> seeds;
  for (const SeedFile& s : seed_corpus())
    if (s.format == format) seeds.push_back(s.bytes);
  UOE_CHECK(!seeds.empty(), "[fuzz] no seed of the format '", format, "'");
  return seeds;
}

void write_seed_checkpoint(const std::string& dir) { save(first_checkpoint(), dir); }

}  // namespace uoe::fuzz
