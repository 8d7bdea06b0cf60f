// uoe_fuzz: writes the seed corpus, runs a mutation campaign, or replays saved inputs through a fuzz target.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "core/atomic_file.h"
#include "core/error.h"
#include "corpus.h"
#include "driver.h"
#include "scratch.h"

namespace {

constexpr const char* kUsage =
    "usage: uoe_fuzz corpus DIR                          write the seed corpus as DIR/<format>/<file>\n"
    "       uoe_fuzz run FORMAT CORPUS_DIR [INPUTS [SEED]] a mutation campaign (default 10000 inputs, seed 1)\n"
    "       uoe_fuzz replay FORMAT FILE...               run saved inputs through FORMAT's target\n"
    "formats: safetensors, optimizer, config, trainer_state, tokenizer, token_file\n";

int write_corpus(const std::string& dir) {
  for (const uoe::fuzz::SeedFile& s : uoe::fuzz::seed_corpus()) {
    std::filesystem::create_directories(dir + "/" + s.format);
    uoe::fuzz::write_bytes(dir + "/" + s.format + "/" + s.name, s.bytes);
    std::printf("%s/%s/%s (%zu bytes)\n", dir.c_str(), s.format.c_str(), s.name.c_str(), s.bytes.size());
  }
  return 0;
}

int run(const std::string& format, const std::string& corpus_dir, long long inputs, unsigned long long seed) {
  const uoe::fuzz::Target& target = uoe::fuzz::find_target(format);
  const uoe::fuzz::Campaign c = uoe::fuzz::run_campaign(target, uoe::fuzz::read_corpus(corpus_dir), inputs, seed);
  std::printf("%s: %lld inputs in %.2f s, %zu findings\n", format.c_str(), (long long)c.inputs, c.seconds,
              c.findings.size());
  for (const uoe::fuzz::Finding& f : c.findings)
    std::printf("  input %lld: %s\n    saved to %s\n", (long long)f.index, f.what.c_str(), f.path.c_str());
  return c.findings.empty() ? 0 : 1;
}

int replay(const std::string& format, int n, char** files) {
  const uoe::fuzz::Target& target = uoe::fuzz::find_target(format);
  int findings = 0;
  for (int i = 0; i < n; ++i) {
    const std::string what = uoe::fuzz::run_one(target, uoe::read_file_bytes(files[i]));
    std::printf("%s: %s\n", files[i], what.empty() ? "read or cleanly rejected" : what.c_str());
    findings += !what.empty();
  }
  return findings ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string cmd = argc > 1 ? argv[1] : "";
  try {
    if (cmd == "corpus" && argc == 3) return write_corpus(argv[2]);
    if (cmd == "run" && argc >= 4 && argc <= 6)
      return run(argv[2], argv[3], argc > 4 ? std::atoll(argv[4]) : 10000, argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 1);
    if (cmd == "replay" && argc >= 4) return replay(argv[2], argc - 3, argv + 3);
  } catch (const uoe::Error& e) {
    std::fprintf(stderr, "uoe_fuzz: %s\n", e.what());
    return 2;
  }
  std::fputs(kUsage, stderr);
  return 2;
}
