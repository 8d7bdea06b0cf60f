// The fuzz driver: runs mutants of a corpus through a target, classifies each outcome, keeps what it finds.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "targets.h"

namespace uoe::fuzz {

// Inputs that take more CPU time than this are findings (the fuzz inputs are at most 64 KiB); past kHangSeconds of
// wall-clock time, SIGALRM ends the process. An input during which the process's peak memory grew by more than
// kMaxMemoryGrowthBytes is a finding too: the readers must check sizes against the file before allocating.
constexpr double kSlowInputSeconds = 1.0;
constexpr unsigned kHangSeconds = 30;
constexpr int64_t kMaxMemoryGrowthBytes = int64_t(1) << 30;

// What one input did: empty when it was read or cleanly rejected (a uoe::Error), else the finding: the exception
// type and message, the time past kSlowInputSeconds, or the memory past kMaxMemoryGrowthBytes.
std::string run_one(const Target& target, const std::string& bytes);

struct Finding {
  int64_t index;     // the input's number: the Mutator seeded with input_seed(seed, index) made it
  std::string what;  // as run_one reports it
  std::string path;  // where the input was saved, for `uoe_fuzz replay <format> <path>`
};

struct Campaign {
  int64_t inputs = 0;    // run
  int64_t rejected = 0;  // of which a uoe::Error refused
  double seconds = 0;
  std::vector<Finding> findings;  // at most 10: the campaign stops at the tenth
};

// The seed of input `index`'s Mutator in a campaign seeded with `seed`: one input is remade from (seed, index).
uint64_t input_seed(uint64_t seed, int64_t index);

// Runs `inputs` mutants of `corpus` through `target`, each saved under findings_dir() while it runs and kept when
// it is a finding. A crash, sanitizer report or hang ends the process and leaves its input there; the process
// prints the format, seed and input index too where it can (hang, AddressSanitizer, or a fatal signal).
Campaign run_campaign(const Target& target, const std::vector<std::string>& corpus, int64_t inputs, uint64_t seed);

// $UOE_FUZZ_FINDINGS, else $TMPDIR/uoe-fuzz-findings (or /tmp/...): made when first needed.
std::string findings_dir();

// The files of a directory (a corpus written by `uoe_fuzz corpus`, or libFuzzer's), sorted by name; an error names
// a missing or empty directory.
std::vector<std::string> read_corpus(const std::string& dir);

}  // namespace uoe::fuzz
