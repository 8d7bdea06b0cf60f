// Per-thread working memory of the CPU kernels: a buffer kept between calls, and typed arrays carved out of one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace uoe::cpu::detail {

// A per-thread working buffer (hold it thread_local): page aligned (2 MB and THP-advised when large), grown on
// demand, never initialised, kept for reuse (a fresh multi-MB buffer per call costs page faults every time).
class Scratch {
 public:
  Scratch() = default;
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  ~Scratch();
  void* get(size_t bytes);  // at least `bytes`; the contents of a smaller earlier get are not kept

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
};

// Carves typed arrays one after another out of a workspace, each on a 64-byte boundary of it; bytes<X>(n) is the
// room one array of n X takes.
struct Carve {
  std::byte* p;
  template <typename X>
  static size_t bytes(int64_t n) {
    return (size_t(n) * sizeof(X) + 63) / 64 * 64;
  }
  template <typename X>
  X* take(int64_t n) {
    X* r = reinterpret_cast<X*>(p);
    p += bytes<X>(n);
    return r;
  }
};

}  // namespace uoe::cpu::detail
