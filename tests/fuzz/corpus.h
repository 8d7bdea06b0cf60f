// The fuzzer's seed corpus: small valid files of every fuzzed format, made by uoe's own writers.
#pragma once
#include <string>
#include <vector>

namespace uoe::fuzz {

// One seed file: `uoe_fuzz corpus DIR` writes `bytes` to DIR/<format>/<name>.
struct SeedFile {
  std::string format;
  std::string name;
  std::string bytes;
};

// Every seed, in a fixed order, byte-for-byte the same on every run: the files of two small checkpoints written by
// save_checkpoint (model and optimizer safetensors, config.json, trainer_state.json, tokenizer.json with a byte
// and a BPE tokenizer), and token files with 2- and 4-byte ids written by write_token_file. No third-party data:
// the BPE tokenizer is trained on a made-up sentence.
std::vector<SeedFile> seed_corpus();
// The seeds of one format, in seed_corpus()'s order: what the campaigns mutate. Made in memory on every run, so no
// generated data file lives in the repository.
std::vector<std::string> seeds_of(const std::string& format);

// Writes a valid checkpoint directory (the first of the two) to `dir`, which must not exist: what a fuzz target
// puts one mutated file into before reading the whole directory as `uoe train --resume` does.
void write_seed_checkpoint(const std::string& dir);

}  // namespace uoe::fuzz
