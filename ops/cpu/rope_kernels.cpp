// CPU RoPE: pairs (i, i + Dh/2) of position p rotate by p * base^(-2i/Dh); the angle tables are built once and kept.
// bfloat16 x is rotated in float32 registers (a float32 table) and rounded once.
#include "ops/kernels/rope.h"

#include <omp.h>

#include <cmath>
#include <memory>
#include <mutex>
#include <type_traits>
#include <utility>
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

// The cos/sin tables [T, h] of positions pos_offset.. (sin negated for the inverse rotation), computed in double.
template <typename C>
struct RopeTable {
  std::vector<C> cs, sn;
};

template <typename C>
std::shared_ptr<const RopeTable<C>> build_rope_table(int64_t T, int64_t Dh, double base, int64_t pos_offset,
                                                     bool inverse) {
  const int64_t h = Dh / 2;
  auto table = std::make_shared<RopeTable<C>>();
  table->cs.resize(size_t(T * h));
  table->sn.resize(size_t(T * h));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < h; ++i) {
      const double angle = double(t + pos_offset) * std::pow(base, -2.0 * double(i) / double(Dh));
      table->cs[size_t(t * h + i)] = C(std::cos(angle));
      table->sn[size_t(t * h + i)] = C(inverse ? -std::sin(angle) : std::sin(angle));
    }
  return table;
}

// The table of these arguments, built on first use and kept (the last kCachedTables asked for): a training step asks
// for the same few (forward and backward of every layer), and building one is T·Dh/2 sin and cos calls on one thread
// while the others wait.
template <typename C>
std::shared_ptr<const RopeTable<C>> rope_table(int64_t T, int64_t Dh, double base, int64_t pos_offset, bool inverse) {
  struct Key {
    int64_t T, Dh;
    double base;
    int64_t pos_offset;
    bool inverse;
    bool operator==(const Key&) const = default;
  };
  constexpr size_t kCachedTables = 8;
  static std::mutex mutex;
  static std::vector<std::pair<Key, std::shared_ptr<const RopeTable<C>>>> cache;  // least recently built first
  const Key key{T, Dh, base, pos_offset, inverse};
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [k, table] : cache)
      if (k == key) return table;
  }
  auto table = build_rope_table<C>(T, Dh, base, pos_offset, inverse);
  std::lock_guard<std::mutex> lock(mutex);
  if (cache.size() == kCachedTables) cache.erase(cache.begin());
  cache.emplace_back(key, table);
  return table;
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
    const std::shared_ptr<const RopeTable<C>> table = rope_table<C>(T, Dh, base, pos_offset, inverse);
    const C* cs = table->cs.data();
    const C* sn = table->sn.data();
    const S* px = x.data_ptr<S>();
    S* py = y.data_ptr<S>();
#pragma omp parallel if (x.numel() >= 32768 && !omp_in_parallel())
    {
      std::vector<C> buf(std::is_same_v<S, C> ? 0 : size_t(2 * H * Dh));
#pragma omp for schedule(static)
      for (int64_t bt = 0; bt < B * T; ++bt) {
        const int64_t t = bt % T;
        rotate_heads(px + bt * H * Dh, py + bt * H * Dh, cs + t * h, sn + t * h, H, Dh, buf.data());
      }
    }
  });
  return y;
}

}  // namespace uoe::cpu
