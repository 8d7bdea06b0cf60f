// What the emulated kernel tests (tests/cuda_emu/) share: random inputs exact in every storage type, storage types to
// and from double, output buffers poisoned with NaN and guarded past their end, and the normwise error against a
// reference in double.
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>

namespace uoe::cuda_emu {

// A storage type's value as a double, and a double rounded into it (bfloat16 to nearest even).
template <class S>
double to_double(S x) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return __bfloat162float(x);
  else return double(x);
}
template <class S>
S from_double(double x) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return __float2bfloat16_rn(float(x));
  else return S(x);
}

// A buffer of n elements followed by a guard, 256-byte aligned like the GPU allocator's blocks (so that every vector
// access a launcher allows is aligned here too); all of it starts as NaN bytes (0xff), so an element nothing wrote
// shows in the error, and a write past the end in guard_intact().
template <class S>
class Guarded {
 public:
  static constexpr size_t kGuardBytes = 256;
  explicit Guarded(size_t n)
      : n_(n), bytes_(n * sizeof(S) + kGuardBytes),
        data_(static_cast<unsigned char*>(::operator new[](bytes_, std::align_val_t(256)))) {
    std::memset(data_.get(), 0xff, bytes_);
  }
  S* p() { return reinterpret_cast<S*>(data_.get()); }
  const S* p() const { return reinterpret_cast<const S*>(data_.get()); }
  bool guard_intact() const {
    for (size_t i = n_ * sizeof(S); i < bytes_; ++i)
      if (data_[i] != 0xff) return false;
    return true;
  }

 private:
  struct Free {
    void operator()(unsigned char* q) const { ::operator delete[](q, std::align_val_t(256)); }
  };
  size_t n_, bytes_;
  std::unique_ptr<unsigned char[], Free> data_;
};

// ||x - ref|| / ||ref|| over the finite entries of ref (the first ref.size() of x); an infinite or NaN entry of ref
// must be matched exactly, else the result is NaN (which fails any bound).
template <class S>
double rel_err(const S* x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double v = to_double(x[i]);
    if (std::isfinite(ref[i])) num += (v - ref[i]) * (v - ref[i]), den += ref[i] * ref[i];
    else if (std::isnan(ref[i]) ? !std::isnan(v) : v != ref[i]) return NAN;
  }
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

// x rounded into S, element by element.
template <class S>
std::vector<S> as(const std::vector<double>& x) {
  std::vector<S> r(x.size());
  for (size_t i = 0; i < x.size(); ++i) r[i] = from_double<S>(x[i]);
  return r;
}

// Values rounded to bfloat16 (exact in every storage type), in place.
inline void round_to_bf16(std::vector<double>& x) {
  for (double& e : x) e = __bfloat162float(__float2bfloat16_rn(float(e)));
}
// n normal values of standard deviation `scale`, rounded to bfloat16.
inline std::vector<double> bf16_normal(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> dist(0.0, scale);
  std::vector<double> v(n);
  for (double& x : v) x = dist(rng);
  round_to_bf16(v);
  return v;
}

}  // namespace uoe::cuda_emu
