// uoe counter-based RNG: Philox4x32-10, a seed+offset Generator, and deterministic parallel fill functions.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>

namespace uoe {

// ---------------------------------------------------------------------------------------------
// Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC'11). A keyed bijection on 128-bit counters; output depends only on (key, counter).
// ---------------------------------------------------------------------------------------------
struct Philox {
  // The raw algorithm: 4x32-bit counter, 2x32-bit key, 10 rounds (matches the Random123
  // known-answer vectors).
  static std::array<uint32_t, 4> block(const std::array<uint32_t, 4>& counter,
                                       const std::array<uint32_t, 2>& key);
  // uoe's use of it: key = {lo32(seed), hi32(seed)}, counter = {lo32(c), hi32(c), 0, 0}.
  static std::array<uint32_t, 4> block(uint64_t seed, uint64_t counter);
};

// ---------------------------------------------------------------------------------------------
// Random-number stream model.
//
// A stream is identified by a 64-bit seed. Its 32-bit "words" are numbered by a 64-bit offset:
// word number k is word (k % 4) of Philox::block(seed, k / 4). Every fill function below turns
// words into values so that element i of the output depends only on (seed, start + i * W),
// where W is the number of words the element type consumes:
//
//   fill_uniform(float)   W = 1   element i <- word start+i
//   fill_normal(float)    W = 1   elements 2j, 2j+1 <- Box-Muller on words start+2j, start+2j+1
//   fill_uniform(double)  W = 2   element i <- words start+2i (low 32 bits), start+2i+1 (high)
//   fill_normal(double)   W = 2   elements 2j, 2j+1 <- Box-Muller on the 4 words of one block
//   fill_randint(int64_t) W = 2   element i <- 64-bit word pair as for uniform(double)
//
// `start` must be a multiple of 4 (i.e. block aligned; Generator::reserve guarantees it); the
// functions throw std::invalid_argument otherwise. Consequently filling [0, n) in one call gives
// exactly the same values as filling [0, k) at `start` and [k, n) at `start + k * W` whenever
// k * W is a multiple of 4. A fill of n elements consumes n * W words; reserve that many.
//
// Results never depend on the number of OpenMP threads (fills are parallel over blocks, each
// element computed from its own index only). Uniform and randint outputs use only integer and
// correctly rounded IEEE operations, written so that FMA contraction cannot change them, so they
// are bit-reproducible on any platform / ISA / build flags (a GPU port can match them); normal outputs
// additionally go through libm's log/sqrt/sin/cos in double precision, so across different
// libm implementations they can differ in the last bit of the float (very rarely) or double.
// ---------------------------------------------------------------------------------------------

inline constexpr uint64_t kRngWordsPerFloat = 1;   // uniform/normal float
inline constexpr uint64_t kRngWordsPerDouble = 2;  // uniform/normal double
inline constexpr uint64_t kRngWordsPerInt64 = 2;   // randint

// Stateful wrapper: a seed plus a 64-bit word offset that advances as numbers are drawn.
// All members are thread-safe.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  Generator(const Generator& other);
  Generator& operator=(const Generator& other);

  uint64_t seed() const;
  uint64_t offset() const;
  void set_state(uint64_t seed, uint64_t offset);
  // Reserve n words: returns the current offset (the `start` to pass to a fill function) and
  // advances the offset by n rounded up to a multiple of 4, so every start is block aligned.
  // (If the offset was set to a value that is not a multiple of 4, it is first rounded up.)
  uint64_t reserve(uint64_t n);

 private:
  mutable std::mutex mu_;
  uint64_t seed_ = 0;
  uint64_t offset_ = 0;
};

// The global generator, seeded 0 at start-up. manual_seed(s) sets it to (seed s, offset 0).
Generator& default_generator();
void manual_seed(uint64_t seed);

// Uniform on [low, high) (requires low <= high with high - low finite, else std::invalid_argument;
// low == high gives low). float: 24 random bits,
// x = (w >> 8) * 2^-24 in [0, 1), value = float(double(low) + x * double(high - low)) with
// high - low rounded to float first (the product is exact, so FMA contraction cannot change it).
// double: x = (53 top bits of the word pair) * 2^-53, value = fma(x, high - low, low).
// Either way a value that rounds up to high is replaced by the largest value below high.
void fill_uniform(float* out, int64_t n, uint64_t seed, uint64_t start, float low, float high);
void fill_uniform(double* out, int64_t n, uint64_t seed, uint64_t start, double low, double high);

// Normal(mean, stddev) by Box-Muller: from u1 in (0, 1] and u2 in [0, 1), r = sqrt(-2 ln u1),
// element 2j = mean + stddev * r cos(2 pi u2), element 2j+1 = mean + stddev * r sin(2 pi u2).
// float: u1 = (w0 + 1) * 2^-32, u2 = w1 * 2^-32 from the pair's two words; everything computed
// in double, then rounded once to float. double: u1 = (k0 + 1) * 2^-53, u2 = k1 * 2^-53 with
// k0 = top 53 bits of words 0 (low), 1 (high) and k1 likewise of words 2, 3 of the block.
// stddev == 0 gives exactly mean.
void fill_normal(float* out, int64_t n, uint64_t seed, uint64_t start, float mean, float stddev);
void fill_normal(double* out, int64_t n, uint64_t seed, uint64_t start, double mean, double stddev);

// Integers uniform on [low, high) (requires low < high; any int64 range, up to the full one).
// r = 64 random bits, value = low + floor(r * (high - low) / 2^64) (Lemire's multiply-shift,
// without rejection so each element uses a fixed number of words). Bias: each value's
// probability is within 2^-64 of 1/(high - low) in absolute terms, i.e. a relative error of at
// most (high - low) / 2^64 (< 1e-9 for ranges below 2^34).
void fill_randint(int64_t* out, int64_t n, uint64_t seed, uint64_t start, int64_t low, int64_t high);

}  // namespace uoe
