// CPU copy with dtype conversion: round-to-nearest-even for bf16/f16, fast paths for contiguous data.
#include "ops/kernels/copy.h"

#include <cstring>
#include <type_traits>

#include "ops/cpu/loops.h"

namespace uoe::cpu {
namespace {

template <typename T>
constexpr bool is_half_v = std::is_same_v<T, BFloat16> || std::is_same_v<T, Float16>;

template <typename To, typename From>
To cast_value(From v) {
  if constexpr (std::is_same_v<To, From>) {
    return v;
  } else if constexpr (is_half_v<To>) {
    return To(static_cast<float>(v));
  } else if constexpr (is_half_v<From>) {
    return static_cast<To>(static_cast<float>(v));
  } else {
    return static_cast<To>(v);
  }
}

// Contiguous f32 <-> bf16/f16 go through the vectorised bulk converters.
bool bulk_convert(const Tensor& dst, const Tensor& src) {
  if (!dst.is_contiguous() || !src.is_contiguous() || dst.shape() != src.shape()) return false;
  const int64_t n = dst.numel();
  const DType d = dst.dtype(), s = src.dtype();
  if (d == s) {
    std::memcpy(dst.raw_data(), src.raw_data(), size_t(n) * dst.itemsize());
    return true;
  }
  if (s == DType::Float32 && d == DType::BFloat16) convert_f32_to_bf16(src.data_ptr<float>(), dst.data_ptr<BFloat16>(), n);
  else if (s == DType::BFloat16 && d == DType::Float32) convert_bf16_to_f32(src.data_ptr<BFloat16>(), dst.data_ptr<float>(), n);
  else if (s == DType::Float32 && d == DType::Float16) convert_f32_to_f16(src.data_ptr<float>(), dst.data_ptr<Float16>(), n);
  else if (s == DType::Float16 && d == DType::Float32) convert_f16_to_f32(src.data_ptr<Float16>(), dst.data_ptr<float>(), n);
  else return false;
  return true;
}

}  // namespace

void copy_cast(const Tensor& dst, const Tensor& src) {
  if (dst.numel() == 0 || bulk_convert(dst, src)) return;
  dispatch_all(dst.dtype(), [&](auto to_tag) {
    using To = typename decltype(to_tag)::type;
    dispatch_all(src.dtype(), [&](auto from_tag) {
      using From = typename decltype(from_tag)::type;
      unary_loop<To, From>(dst, src, [](From v) { return cast_value<To, From>(v); });
    });
  });
}

void fill(const Tensor& dst, double value) {
  dispatch_all(dst.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    // A 0-dim source broadcast over dst: the loop never reads dst's (uninitialised) contents.
    const Tensor src = empty({}, TensorOptions{}.with_dtype(dst.dtype()));
    *src.data_ptr<T>() = cast_value<T, double>(value);
    unary_loop<T, T>(dst, src, [](T v) { return v; });
  });
}

}  // namespace uoe::cpu
