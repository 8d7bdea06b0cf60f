// Philox4x32-10, Generator state, and the OpenMP-parallel, thread-count-independent fill functions.
#include "rng.h"

#include <omp.h>

#include <cmath>
#include <limits>
#include <stdexcept>

namespace uoe {
namespace {

// Philox4x32 constants from the paper: round multipliers and the Weyl key increments
// (golden ratio and sqrt(3) - 1, as 32-bit fractions).
constexpr uint32_t kMul0 = 0xD2511F53u;
constexpr uint32_t kMul1 = 0xCD9E8D57u;
constexpr uint32_t kWeyl0 = 0x9E3779B9u;
constexpr uint32_t kWeyl1 = 0xBB67AE85u;

struct Block {
  uint32_t w[4];
};

// Ten rounds. Each round: two 32x32->64 multiplies of counter words 0 and 2; the new state is
// (hi(M1*c2) ^ c1 ^ k0, lo(M1*c2), hi(M0*c0) ^ c3 ^ k1, lo(M0*c0)); the key is bumped by the Weyl
// constants between rounds.
inline Block philox10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = static_cast<uint64_t>(kMul0) * c0;
    const uint64_t p1 = static_cast<uint64_t>(kMul1) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c1 = n1;
    c2 = n2;
    c3 = n3;
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return Block{{c0, c1, c2, c3}};
}

inline Block philox_block(uint64_t seed, uint64_t counter) {
  return philox10(static_cast<uint32_t>(counter), static_cast<uint32_t>(counter >> 32), 0u, 0u,
                  static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// Blocks per fill below which the work stays on the calling thread.
constexpr int64_t kParallelBlocks = 4096;

// Element i of `out` comes from slot i % E of Philox block start/4 + i / E. make(block, dst)
// writes the E elements of one block. The full blocks are split statically over threads; the
// last partial block goes through a temporary. Output is independent of the thread count.
template <int E, class T, class Make>
void fill_blocks(T* out, int64_t n, uint64_t seed, uint64_t start, Make make) {
  if (start % 4 != 0) throw std::invalid_argument("uoe rng: start offset must be a multiple of 4");
  if (n <= 0) return;
  const uint64_t b0 = start / 4;
  const int64_t nfull = n / E;
  const int64_t rem = n % E;
#pragma omp parallel for simd schedule(static) if (nfull >= kParallelBlocks && !omp_in_parallel())
  for (int64_t j = 0; j < nfull; ++j) {
    make(philox_block(seed, b0 + static_cast<uint64_t>(j)), out + j * E);
  }
  if (rem != 0) {
    T tmp[E];
    make(philox_block(seed, b0 + static_cast<uint64_t>(nfull)), tmp);
    for (int64_t r = 0; r < rem; ++r) out[nfull * E + r] = tmp[r];
  }
}

inline uint64_t pair64(uint32_t lo, uint32_t hi) { return (static_cast<uint64_t>(hi) << 32) | lo; }

// Largest value below `high` (for the [low, high) guarantee).
template <class T>
T below(T high) {
  return std::nextafter(high, -std::numeric_limits<T>::infinity());
}

template <class T>
void check_range(T low, T high, const char* what) {
  if (!(low <= high) || !std::isfinite(high - low)) throw std::invalid_argument(what);
}

constexpr double kTwoPi = 6.283185307179586476925286766559;

// Box-Muller in double: u1 in (0, 1], u2 in [0, 1).
inline void box_muller(double u1, double u2, double& z0, double& z1) {
  const double r = std::sqrt(-2.0 * std::log(u1));
  const double theta = kTwoPi * u2;
  z0 = r * std::cos(theta);
  z1 = r * std::sin(theta);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
std::array<uint32_t, 4> Philox::block(const std::array<uint32_t, 4>& counter,
                                      const std::array<uint32_t, 2>& key) {
  const Block b = philox10(counter[0], counter[1], counter[2], counter[3], key[0], key[1]);
  return {b.w[0], b.w[1], b.w[2], b.w[3]};
}

std::array<uint32_t, 4> Philox::block(uint64_t seed, uint64_t counter) {
  const Block b = philox_block(seed, counter);
  return {b.w[0], b.w[1], b.w[2], b.w[3]};
}

// ---------------------------------------------------------------------------------------------
Generator::Generator(const Generator& other) {
  std::lock_guard<std::mutex> lock(other.mu_);
  seed_ = other.seed_;
  offset_ = other.offset_;
}

Generator& Generator::operator=(const Generator& other) {
  if (this == &other) return *this;
  uint64_t s, o;
  {
    std::lock_guard<std::mutex> lock(other.mu_);
    s = other.seed_;
    o = other.offset_;
  }
  set_state(s, o);
  return *this;
}

uint64_t Generator::seed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return seed_;
}

uint64_t Generator::offset() const {
  std::lock_guard<std::mutex> lock(mu_);
  return offset_;
}

void Generator::set_state(uint64_t seed, uint64_t offset) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  offset_ = offset;
}

uint64_t Generator::reserve(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t start = (offset_ + 3u) & ~uint64_t{3};
  offset_ = start + ((n + 3u) & ~uint64_t{3});
  return start;
}

Generator& default_generator() {
  static Generator gen(0);
  return gen;
}

void manual_seed(uint64_t seed) { default_generator().set_state(seed, 0); }

// ---------------------------------------------------------------------------------------------
void fill_uniform(float* out, int64_t n, uint64_t seed, uint64_t start, float low, float high) {
  check_range(low, high, "uoe::fill_uniform: need low <= high with high - low finite");
  // x * range is exact in double (24 + 24 bits), so the value is the same whether or not the
  // compiler fuses the multiply-add (-march with FMA); one rounding to double, one to float.
  const double range = static_cast<double>(high - low), lo = low;
  const float top = low < high ? below(high) : low;
  fill_blocks<4>(out, n, seed, start, [=](const Block& b, float* dst) {
    for (int k = 0; k < 4; ++k) {
      const double x = static_cast<double>(b.w[k] >> 8) * 0x1p-24;
      const float v = static_cast<float>(lo + x * range);
      dst[k] = v < top ? v : top;
    }
  });
}

void fill_uniform(double* out, int64_t n, uint64_t seed, uint64_t start, double low, double high) {
  check_range(low, high, "uoe::fill_uniform: need low <= high with high - low finite");
  const double range = high - low;
  const double top = low < high ? below(high) : low;
  fill_blocks<2>(out, n, seed, start, [=](const Block& b, double* dst) {
    for (int k = 0; k < 2; ++k) {
      const double x = static_cast<double>(pair64(b.w[2 * k], b.w[2 * k + 1]) >> 11) * 0x1p-53;
      const double v = std::fma(x, range, low);  // explicitly fused: same result on every ISA
      dst[k] = v < top ? v : top;
    }
  });
}

void fill_normal(float* out, int64_t n, uint64_t seed, uint64_t start, float mean, float stddev) {
  const double m = mean, s = stddev;
  fill_blocks<4>(out, n, seed, start, [=](const Block& b, float* dst) {
    for (int k = 0; k < 4; k += 2) {
      const double u1 = (static_cast<double>(b.w[k]) + 1.0) * 0x1p-32;
      const double u2 = static_cast<double>(b.w[k + 1]) * 0x1p-32;
      double z0, z1;
      box_muller(u1, u2, z0, z1);
      dst[k] = static_cast<float>(m + s * z0);
      dst[k + 1] = static_cast<float>(m + s * z1);
    }
  });
}

void fill_normal(double* out, int64_t n, uint64_t seed, uint64_t start, double mean, double stddev) {
  fill_blocks<2>(out, n, seed, start, [=](const Block& b, double* dst) {
    const double u1 = static_cast<double>((pair64(b.w[0], b.w[1]) >> 11) + 1) * 0x1p-53;
    const double u2 = static_cast<double>(pair64(b.w[2], b.w[3]) >> 11) * 0x1p-53;
    double z0, z1;
    box_muller(u1, u2, z0, z1);
    dst[0] = mean + stddev * z0;
    dst[1] = mean + stddev * z1;
  });
}

void fill_randint(int64_t* out, int64_t n, uint64_t seed, uint64_t start, int64_t low, int64_t high) {
  if (!(low < high)) throw std::invalid_argument("uoe::fill_randint: need low < high");
  const uint64_t range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  const uint64_t base = static_cast<uint64_t>(low);
  fill_blocks<2>(out, n, seed, start, [=](const Block& b, int64_t* dst) {
    for (int k = 0; k < 2; ++k) {
      const unsigned __int128 prod =
          static_cast<unsigned __int128>(pair64(b.w[2 * k], b.w[2 * k + 1])) * range;
      dst[k] = static_cast<int64_t>(base + static_cast<uint64_t>(prod >> 64));
    }
  });
}

}  // namespace uoe
