// CPU RoPE: pairs (i, i + Dh/2) of position p rotate by p * base^(-2i/Dh); the angle table is built once per call.
// bfloat16 x is rotated in float32 registers (a float32 table) and rounded once.
#include "ops/kernels/rope.h"

#include <omp.h>

#include <cmath>
#include <type_traits>
#include <vector>

#include "ops/cpu/simd.h"

namespace uoe::cpu {
namespace {

// y[i] = x[i] cos - x[i+h] sin ; y[i+h] = x[i] sin + x[i+h] cos, for i < h = Dh/2
template <typename T>
UOE_SIMD void rotate(const T* x, T* y, const T* cs, const T* sn, int64_t h) {
#pragma omp simd
  for (int64_t i = 0; i < h; ++i) {
    const T a = x[i], b = x[i + h];
    y[i] = a * cs[i] - b * sn[i];
    y[i + h] = a * sn[i] + b * cs[i];
  }
}

// The H heads of one position (H·Dh contiguous elements): float and double in place; bfloat16 widened to float32
// into buf (2·H·Dh floats), rotated there and rounded once.
template <typename S, typename C>
void rotate_heads(const S* x, S* y, const C* cs, const C* sn, int64_t H, int64_t Dh, C* buf) {
  if constexpr (std::is_same_v<S, C>) {
    for (int64_t hh = 0; hh < H; ++hh) rotate(x + hh * Dh, y + hh * Dh, cs, sn, Dh / 2);
  } else {
    C* out = buf + H * Dh;
    convert_bf16_to_f32(x, buf, H * Dh);
    for (int64_t hh = 0; hh < H; ++hh) rotate(buf + hh * Dh, out + hh * Dh, cs, sn, Dh / 2);
    convert_f32_to_bf16(out, y, H * Dh);
  }
}

// Calls f(TypeTag<S>, TypeTag<C>): the storage type S (float, double, BFloat16) and its compute type C (float for
// BFloat16).
template <typename F>
void dispatch_rope(DType dt, F&& f) {
  if (dt == DType::BFloat16) return f(TypeTag<BFloat16>{}, TypeTag<float>{});
  dispatch_float(dt, "rope", [&](auto tag) { f(tag, tag); });
}

}  // namespace

Tensor rope(const Tensor& x, double base, int64_t pos_offset, bool inverse) {
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), Dh = x.size(3), h = Dh / 2;
  Tensor y = empty(x.shape(), TensorOptions{}.with_dtype(x.dtype()).with_device(x.device()));
  dispatch_rope(x.dtype(), [&](auto s_tag, auto c_tag) {
    using S = typename decltype(s_tag)::type;
    using C = typename decltype(c_tag)::type;
    // cos/sin table [T, h], computed in double
    std::vector<C> cs(size_t(T * h)), sn(size_t(T * h));
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < h; ++i) {
        const double angle = double(t + pos_offset) * std::pow(base, -2.0 * double(i) / double(Dh));
        cs[size_t(t * h + i)] = C(std::cos(angle));
        sn[size_t(t * h + i)] = C(inverse ? -std::sin(angle) : std::sin(angle));
      }
    const S* px = x.data_ptr<S>();
    S* py = y.data_ptr<S>();
#pragma omp parallel if (x.numel() >= 32768 && !omp_in_parallel())
    {
      std::vector<C> buf(std::is_same_v<S, C> ? 0 : size_t(2 * H * Dh));
#pragma omp for schedule(static)
      for (int64_t bt = 0; bt < B * T; ++bt) {
        const int64_t t = bt % T;
        rotate_heads(px + bt * H * Dh, py + bt * H * Dh, cs.data() + t * h, sn.data() + t * h, H, Dh, buf.data());
      }
    }
  });
  return y;
}

}  // namespace uoe::cpu
