// A deterministic mutation engine for the fuzzer: byte-level and format-aware edits of seed files.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace uoe::fuzz {

// Makes inputs from seeds. The same seed (of the generator) and the same corpus give the same inputs on every
// machine: the random source is a SplitMix64 stream, not a standard library distribution.
class Mutator {
 public:
  explicit Mutator(uint64_t seed) : state_(seed) {}

  // A mutant of a random corpus file: one to four edits, each drawn from
  //   bytes: bit flips; a byte set to 0, 0xff, 0x7f or 0x80; truncation; a span duplicated or deleted; a splice
  //          with another corpus file; a little-endian 4- or 8-byte field set to an absurd value (the header fields
  //          of a token file, the length prefix of a safetensors file, or anywhere);
  //   JSON:  a number replaced by an absurd one (1e308, -1, 2^63, 2^64, NaN-like text, ...); a string replaced by
  //          another string of the file or a field name (duplicate keys, dtypes, kinds); a value replaced by one of
  //          another type; a member or array element duplicated or removed.
  // JSON edits apply to a JSON file, or to the JSON header of a safetensors file, whose length prefix is then
  // rewritten to match (a header edit that only broke the prefix would never reach the header's checks).
  std::string mutate(const std::vector<std::string>& corpus);

  uint64_t next();                 // the next 64 random bits
  size_t below(size_t n);          // uniform enough in [0, n); n > 0

 private:
  std::string edit(std::string s, const std::vector<std::string>& corpus);
  std::string edit_bytes(std::string s, const std::vector<std::string>& corpus);
  std::string edit_json(std::string s);
  uint64_t state_;
};

}  // namespace uoe::fuzz
