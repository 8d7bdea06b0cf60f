// The fuzzer in the suite: a mutation campaign per file format over the seeds that tests/fuzz/corpus.cpp makes with
// uoe's own writers. Every input must be read or rejected with one uoe::Error: no other exception, crash, sanitizer report
// or hang. UOE_FUZZ_INPUTS sets the inputs per format (default 4000: 24,000 per run), UOE_FUZZ_SEED the campaign.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "core/safetensors.h"
#include "fuzz/corpus.h"
#include "fuzz/driver.h"
#include "fuzz/mutator.h"
#include "one_thread.h"

namespace uoe::fuzz {
namespace {

uint64_t env_number(const char* name, uint64_t def) {
  const char* v = std::getenv(name);
  if (!v || !*v) return def;
  char* end = nullptr;
  const unsigned long long n = std::strtoull(v, &end, 10);
  if (*end || n == 0) ADD_FAILURE() << name << "=" << v << " is not a positive integer";
  return n;
}

// One OpenMP thread while a campaign runs (tests/one_thread.h): its inputs are small, and each reader's parallel
// loops (the finiteness check of a checkpoint's tensors) would otherwise wake every worker thousands of times.
void fuzz_format(const char* format) {
  const test::OneThread one_thread;
  const int64_t inputs = int64_t(env_number("UOE_FUZZ_INPUTS", 4000));
  const uint64_t seed = env_number("UOE_FUZZ_SEED", 1);
  const Campaign c = run_campaign(find_target(format), seeds_of(format), inputs, seed);
  std::printf("fuzz %s: %lld inputs in %.2f s\n", format, (long long)c.inputs, c.seconds);
  for (const Finding& f : c.findings)
    ADD_FAILURE() << "fuzz finding: format " << format << ", seed " << seed << ", input " << f.index << ": " << f.what
                  << "\n  the input is saved at " << f.path << "\n  replay: uoe_fuzz replay " << format << " "
                  << f.path;
  EXPECT_EQ(c.inputs, c.findings.size() < 10 ? inputs : c.inputs);
}

TEST(Fuzz, Safetensors) { fuzz_format("safetensors"); }
TEST(Fuzz, Optimizer) { fuzz_format("optimizer"); }
TEST(Fuzz, Config) { fuzz_format("config"); }
TEST(Fuzz, TrainerState) { fuzz_format("trainer_state"); }
TEST(Fuzz, Tokenizer) { fuzz_format("tokenizer"); }
TEST(Fuzz, TokenFile) { fuzz_format("token_file"); }

// Every seed is valid all the way through its target (a rejected seed would leave its mutants untested past the
// point where it fails).
TEST(FuzzCorpus, EverySeedIsAccepted) {
  const ExpectAccepted strict;
  for (const SeedFile& s : seed_corpus())
    EXPECT_EQ(run_one(find_target(s.format), s.bytes), "") << s.format << "/" << s.name;
}

// The driver's oracle: another exception type is a finding, named with its type; a uoe::Error is not.
TEST(FuzzDriver, ClassifiesOutcomes) {
  const Target clean{"clean", [](const uint8_t*, size_t) { return 0; }};
  const Target bad_alloc{"bad_alloc", [](const uint8_t*, size_t) -> int { throw std::bad_alloc(); }};
  EXPECT_EQ(run_one(clean, "x"), "");
  EXPECT_EQ(run_one(bad_alloc, "x"), "std::bad_alloc: std::bad_alloc");
  const Campaign c = run_campaign(bad_alloc, {"seed"}, 3, 1);
  ASSERT_EQ(c.findings.size(), 3u);
  for (const Finding& f : c.findings) {
    EXPECT_TRUE(std::filesystem::is_regular_file(f.path)) << f.path;
    std::filesystem::remove(f.path);
  }
}

// A campaign is reproducible: input i of seed s is the same bytes on every run and machine.
TEST(FuzzDriver, MutantsDependOnlyOnSeedAndIndex) {
  const std::vector<std::string> corpus = {"{\"a\": [1, 2, \"x\"]}", "0123456789abcdef"};
  std::vector<std::string> first, again;
  for (int64_t i = 0; i < 50; ++i) {
    first.push_back(Mutator(input_seed(7, i)).mutate(corpus));
    again.push_back(Mutator(input_seed(7, i)).mutate(corpus));
  }
  EXPECT_EQ(first, again);
  EXPECT_NE(Mutator(input_seed(7, 0)).mutate(corpus), Mutator(input_seed(8, 0)).mutate(corpus));
}

// The header-aware edits keep a safetensors file's length prefix consistent, so many mutants get past the framing
// to the checks of the tensor fields (dtype, shape, data_offsets), which byte edits alone rarely reach.
TEST(FuzzDriver, SafetensorsMutantsReachTheTensorFieldChecks) {
  const std::vector<std::string> corpus = seeds_of("safetensors");
  int fields = 0, n = 2000;
  for (int64_t i = 0; i < n; ++i) {
    try {
      safetensors::deserialize(Mutator(input_seed(3, i)).mutate(corpus), "mutant");
    } catch (const Error& e) {
      const std::string msg = e.what();
      fields += msg.find("dtype") != std::string::npos || msg.find("shape") != std::string::npos ||
                msg.find("data_offsets") != std::string::npos;
    }
  }
  std::printf("%d of %d mutants rejected by a tensor field check\n", fields, n);
  EXPECT_GT(fields, n / 6);  // 425 today; 273 when header edits keep the seed's length prefix
}

}  // namespace
}  // namespace uoe::fuzz
