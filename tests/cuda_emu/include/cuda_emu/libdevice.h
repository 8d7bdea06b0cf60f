// CUDA's math functions as the emulated kernels see them (every kernel of cuda/ is in namespace uoe::cuda, where these
// hide the C library's): glibc's result moved by up to the maximum error that the CUDA C++ Programming Guide's table
// of mathematical functions gives for the function (expf 2 ulp, logf 1, tanhf 2, powf 4, erfcf 4, ...; exp, log 1,
// sin, cos, pow 2), by a number of ulps in [-max, max] that a hash of the arguments picks (the same arguments, the
// same result, as on a GPU). A kernel or a test whose tolerance holds only for glibc's results (most within half an
// ulp) fails here, as it might on the GPU. Results that are exact in both (0, infinities, NaN, a power of two such as
// expf(0) = 1 or exp2f of an integer) are kept, and so is sqrt: CUDA rounds it correctly (nvcc's -prec-sqrt=true).
#pragma once
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace uoe::cuda_emu::libdevice {

// Which function: each moves its results by its own hash.
enum class Fn : uint64_t { exp = 1, exp2, log, log1p, tanh, erfc, pow, sin, cos };

constexpr uint64_t mix(uint64_t z) {  // splitmix64's finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

template <class T>
uint64_t bits_of(T x) {
  if constexpr (sizeof(T) == 4)
    return std::bit_cast<uint32_t>(x);
  else
    return std::bit_cast<uint64_t>(x);
}

// y moved by k ulps, k in [-max_ulps, max_ulps] picked by (fn, arguments).
template <class T>
T off_by_ulps(T y, int max_ulps, Fn fn, uint64_t arguments) {
  int exponent = 0;
  if (y == T(0) || !std::isfinite(y) || std::fabs(std::frexp(y, &exponent)) == T(0.5)) return y;
  const int k = int(mix(arguments ^ mix(uint64_t(fn))) % uint64_t(2 * max_ulps + 1)) - max_ulps;
  const T toward = k > 0 ? std::numeric_limits<T>::infinity() : -std::numeric_limits<T>::infinity();
  for (int i = 0; i < (k > 0 ? k : -k); ++i) y = std::nextafter(y, toward);
  return y;
}

}  // namespace uoe::cuda_emu::libdevice

namespace uoe::cuda {

#define UOE_EMU_LIBDEVICE_1(name, fname, fn, float_ulps, double_ulps)                                               \
  inline float fname(float x) {                                                                                     \
    return cuda_emu::libdevice::off_by_ulps(std::fn(x), float_ulps, cuda_emu::libdevice::Fn::fn,                    \
                                            cuda_emu::libdevice::bits_of(x));                                       \
  }                                                                                                                 \
  inline float name(float x) { return fname(x); }                                                                   \
  inline double name(double x) {                                                                                    \
    return cuda_emu::libdevice::off_by_ulps(std::fn(x), double_ulps, cuda_emu::libdevice::Fn::fn,                   \
                                            cuda_emu::libdevice::bits_of(x));                                       \
  }

UOE_EMU_LIBDEVICE_1(exp, expf, exp, 2, 1)
UOE_EMU_LIBDEVICE_1(exp2, exp2f, exp2, 2, 1)
UOE_EMU_LIBDEVICE_1(log, logf, log, 1, 1)
UOE_EMU_LIBDEVICE_1(log1p, log1pf, log1p, 1, 1)
UOE_EMU_LIBDEVICE_1(tanh, tanhf, tanh, 2, 2)
UOE_EMU_LIBDEVICE_1(erfc, erfcf, erfc, 4, 5)
UOE_EMU_LIBDEVICE_1(sin, sinf, sin, 2, 2)
UOE_EMU_LIBDEVICE_1(cos, cosf, cos, 2, 2)
#undef UOE_EMU_LIBDEVICE_1

inline float powf(float x, float y) {
  return cuda_emu::libdevice::off_by_ulps(std::pow(x, y), 4, cuda_emu::libdevice::Fn::pow,
                                          cuda_emu::libdevice::bits_of(x) << 32 | cuda_emu::libdevice::bits_of(y));
}
inline float pow(float x, float y) { return powf(x, y); }
inline double pow(double x, double y) {
  return cuda_emu::libdevice::off_by_ulps(std::pow(x, y), 2, cuda_emu::libdevice::Fn::pow,
                                          cuda_emu::libdevice::bits_of(x) ^ cuda_emu::libdevice::mix(
                                                                                cuda_emu::libdevice::bits_of(y)));
}

}  // namespace uoe::cuda
