// The fuzz targets: one per file format a uoe run reads, each feeding bytes to the library's real readers.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace uoe::fuzz {

// Each target reads `size` bytes as one file of its format through the entry points `uoe train --resume` and
// `uoe eval` use, then uses what was read as they do (every tensor byte, token ids, batches, encode and decode).
// It returns 0 when the bytes were read, or rejected with a uoe::Error: one clean error naming the file and field.
// Anything else is a finding: another exception (std::bad_alloc, std::out_of_range, ...), a broken round trip
// (what was read, written back and read again, differs: thrown as std::logic_error), a crash, a sanitizer report
// or a hang. Scratch files live in a directory of this process, made on first use and removed at exit.
int fuzz_safetensors(const uint8_t* data, size_t size);    // model.safetensors (and any safetensors bytes)
int fuzz_optimizer(const uint8_t* data, size_t size);      // optimizer.safetensors (a step and moments)
int fuzz_config(const uint8_t* data, size_t size);         // config.json
int fuzz_trainer_state(const uint8_t* data, size_t size);  // trainer_state.json
int fuzz_tokenizer(const uint8_t* data, size_t size);      // tokenizer.json
int fuzz_token_file(const uint8_t* data, size_t size);     // a token file (uoe prepare's output)

// While one lives, a uoe::Error from the readers is a finding too (a std::logic_error naming it): for checking
// that every seed file is read as valid, all the way through.
class ExpectAccepted {
 public:
  ExpectAccepted();
  ~ExpectAccepted();
  ExpectAccepted(const ExpectAccepted&) = delete;
  ExpectAccepted& operator=(const ExpectAccepted&) = delete;
};

struct Target {
  const char* format;  // as in seed_corpus() and `uoe_fuzz corpus DIR`: DIR/<format>
  int (*run)(const uint8_t* data, size_t size);
};
const std::vector<Target>& all_targets();
// The target of `format`; an unknown name is a uoe::Error listing the formats.
const Target& find_target(const std::string& format);

}  // namespace uoe::fuzz
