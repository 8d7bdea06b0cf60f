// CPU allocator: 64-byte aligned blocks, large ones cached by size so training steps reuse them.
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>

#include "core/allocator.h"
#include "core/error.h"

namespace uoe {
namespace {

// Blocks of at least kCacheMin bytes are kept on free lists keyed by their rounded size
// instead of being returned to the system: a fresh mmap'ed buffer costs a page fault per
// 4 KiB on first touch, which would dominate bandwidth-bound ops. The cache holds at most
// kCacheMax bytes.
constexpr size_t kCacheMin = size_t(1) << 16;
constexpr size_t kCacheMax = size_t(4) << 30;

size_t round_size(size_t n) {
  const size_t unit = n >= kCacheMin ? 4096 : kCpuAlignment;
  UOE_CHECK(n <= SIZE_MAX - unit, "[cpu allocator] cannot allocate ", n, " bytes");
  return (n + unit - 1) / unit * unit;
}

class CpuAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    UOE_CHECK(device.is_cpu(), "[cpu allocator] asked for memory on ", device.str());
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    void* p = nullptr;
    auto it = cache_.find(size);
    if (it != cache_.end()) {
      p = it->second;
      cache_.erase(it);
      cached_ -= size;
    } else {
      p = std::aligned_alloc(kCpuAlignment, size);
      if (!p) {
        release_cache();
        p = std::aligned_alloc(kCpuAlignment, size);
      }
      UOE_CHECK(p, "[cpu allocator] out of memory: requested ", size, " bytes with ",
                stats_.allocated, " bytes in use");
      stats_.reserved += size;
    }
    stats_.allocated += size;
    if (stats_.allocated > stats_.peak) stats_.peak = stats_.allocated;
    return p;
  }

  void deallocate(void* ptr, size_t nbytes) override {
    if (!ptr) return;
    const size_t size = round_size(nbytes);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.allocated -= size;
    if (size >= kCacheMin && cached_ + size <= kCacheMax) {
      cache_.emplace(size, ptr);
      cached_ += size;
    } else {
      std::free(ptr);
      stats_.reserved -= size;
    }
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak = stats_.allocated;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    release_cache();
  }

 private:
  void release_cache() {
    for (auto& [size, p] : cache_) {
      std::free(p);
      stats_.reserved -= size;
    }
    cache_.clear();
    cached_ = 0;
  }

  mutable std::mutex mu_;
  std::multimap<size_t, void*> cache_;
  size_t cached_ = 0;
  AllocatorStats stats_;
};

Allocator* g_cuda_allocator = nullptr;

}  // namespace

void register_cuda_allocator(Allocator* a) { g_cuda_allocator = a; }

Allocator& allocator_for(Device device) {
  static CpuAllocator* cpu = new CpuAllocator();  // never destroyed: tensors may outlive statics
  if (device.is_cpu()) return *cpu;
  UOE_CHECK(g_cuda_allocator, "[allocator] device ", device.str(),
            " needs a CUDA build with a visible GPU");
  return *g_cuda_allocator;
}

}  // namespace uoe
