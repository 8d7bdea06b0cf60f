// CUDA copy with dtype conversion and fill: one elementwise loop (elementwise_loop.cuh) per dtype pair, with the
// bf16/f16 conversions of core/half.h written for the device bit for bit (round to nearest even, NaN kept quiet).
#include "ops/kernels/copy.h"

#include <cstring>
#include <type_traits>

#include "cuda/elementwise_loop.cuh"

namespace uoe::cuda {
namespace {

// Device stand-ins for uoe::BFloat16 / uoe::Float16 (same 16-bit layout; the host structs' constexpr conversions
// are not callable on the device).
struct DevBf16 {
  uint16_t bits;
};
struct DevF16 {
  uint16_t bits;
};

template <typename T> struct DeviceType { using type = T; };
template <> struct DeviceType<BFloat16> { using type = DevBf16; };
template <> struct DeviceType<Float16> { using type = DevF16; };
template <typename T> using device_t = typename DeviceType<T>::type;

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, DevBf16> || std::is_same_v<T, DevF16>;

// ---- core/half.h, on the device --------------------------------------------------------------
__device__ __forceinline__ uint16_t float_to_bf16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const bool is_nan = (u & 0x7fffffffu) > 0x7f800000u;
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t quiet_nan = (u >> 16) | 0x0040u;
  return static_cast<uint16_t>(is_nan ? quiet_nan : rounded);
}

__device__ __forceinline__ float bf16_bits_to_float(uint16_t h) {
  return __uint_as_float(static_cast<uint32_t>(h) << 16);
}

__device__ __forceinline__ uint16_t float_to_f16_bits(float f) {
  const uint32_t u = __float_as_uint(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t a = u & 0x7fffffffu;
  const uint32_t nan = 0x7e00u | ((a >> 13) & 0x3ffu);
  const uint32_t rebiased = a - (112u << 23);
  uint32_t normal = (rebiased + 0x0fffu + ((rebiased >> 13) & 1u)) >> 13;
  normal = normal < 0x7c00u ? normal : 0x7c00u;
  const uint32_t e = (a >> 23) < 113u ? (a >> 23) : 113u;
  const uint32_t m = (a & 0x007fffffu) | 0x00800000u;
  uint32_t shift = 126u - e;
  shift = shift < 31u ? shift : 31u;
  const uint32_t sub = (m + ((1u << (shift - 1u)) - 1u) + ((m >> shift) & 1u)) >> shift;
  const uint32_t mag = a > 0x7f800000u ? nan : (a < 0x38800000u ? sub : normal);
  return static_cast<uint16_t>(sign | mag);
}

__device__ __forceinline__ float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = (static_cast<uint32_t>(h) & 0x8000u) << 16;
  const uint32_t a = static_cast<uint32_t>(h) & 0x7fffu;
  const uint32_t normal = (a << 13) + (112u << 23) + (a >= 0x7c00u ? (112u << 23) : 0u);
  const uint32_t sub = __float_as_uint(__fmul_rn(static_cast<float>(static_cast<int32_t>(a)), 0x1p-24f));
  return __uint_as_float(sign | (a < 0x0400u ? sub : normal));
}

__device__ __forceinline__ float to_float(DevBf16 v) { return bf16_bits_to_float(v.bits); }
__device__ __forceinline__ float to_float(DevF16 v) { return f16_bits_to_float(v.bits); }
template <typename H>
__device__ __forceinline__ H from_float(float f) {
  if constexpr (std::is_same_v<H, DevBf16>) return DevBf16{float_to_bf16_bits(f)};
  else return DevF16{float_to_f16_bits(f)};
}

// cpu::copy_kernels' cast_value: halves go through float.
template <typename To, typename From>
__device__ __forceinline__ To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<To> && is_half_v<From>) {
    return from_float<To>(to_float(v));
  } else if constexpr (is_half_v<To>) {
    return from_float<To>(static_cast<float>(v));
  } else if constexpr (is_half_v<From>) {
    return static_cast<To>(to_float(v));
  } else {
    return static_cast<To>(v);
  }
}

template <typename To, typename From>
struct Cast {
  __device__ __forceinline__ To operator()(From v) const { return cast_value<To, From>(v); }
};

template <typename U>
struct Constant {
  U value;
  __device__ __forceinline__ U operator()() const { return value; }
};

template <typename F>
void dispatch_bits(size_t size, F&& f) {
  switch (size) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default: fail("[copy] internal: element size ", size);
  }
}

void check_device(const char* op, const Tensor& dst, const Tensor& src) {
  UOE_CHECK(dst.is_cuda() && src.is_cuda() && dst.device() == src.device(), "[", op,
            "] CUDA kernel needs both tensors on one GPU, got ", dst.device().str(), " and ", src.device().str());
}

}  // namespace

void copy_cast(const Tensor& dst, const Tensor& src) {
  check_device("copy", dst, src);
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype()) {
    if (dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape()) {
      const int device = dst.device().index;
      DeviceGuard guard(device);
      UOE_CUDA_CHECK("copy", cudaMemcpyAsync(dst.raw_data(), src.raw_data(), size_t(dst.numel()) * dst.itemsize(),
                                             cudaMemcpyDeviceToDevice, current_stream(device)));
      return;
    }
    // Same dtype: move the bits.
    dispatch_bits(dst.itemsize(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      elementwise<U, U>("copy", Cast<U, U>{}, dst, {&src});
    });
    return;
  }
  dispatch_all(dst.dtype(), [&](auto to_tag) {
    using To = device_t<typename decltype(to_tag)::type>;
    dispatch_all(src.dtype(), [&](auto from_tag) {
      using From = device_t<typename decltype(from_tag)::type>;
      if constexpr (!std::is_same_v<To, From>) elementwise<To, From>("copy", Cast<To, From>{}, dst, {&src});
    });
  });
}

void fill(const Tensor& dst, double value) {
  UOE_CHECK(dst.is_cuda(), "[fill] CUDA kernel got a tensor on ", dst.device().str());
  if (dst.numel() == 0) return;
  // The value converted exactly as the CPU converts it, then its bits written everywhere.
  const Tensor one = empty({}, TensorOptions{}.with_dtype(dst.dtype()));
  cpu::fill(one, value);
  dispatch_bits(dst.itemsize(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    U bits;
    std::memcpy(&bits, one.raw_data(), sizeof(U));
    elementwise<U>("fill", Constant<U>{bits}, dst, {});
  });
}

}  // namespace uoe::cuda
