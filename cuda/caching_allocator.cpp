// Caching device allocator (cuda/caching_allocator.h): best-fit blocks split from cudaMalloc'ed segments, or, with
// UOE_CUDA_NO_CACHING=1, one cudaMalloc per request.
#include "cuda/caching_allocator.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "cuda/check.h"
#include "cuda/cuda_api.h"
#include "cuda/pending_frees.h"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

constexpr const char* kOp = "cuda allocator";

// One piece of a segment (one cudaMalloc). Blocks of a segment form a doubly linked list in address order.
struct Block {
  int device = 0;
  bool small = false;
  bool allocated = false;  // handed out, or freed and waiting for other streams: in no free set
  size_t size = 0;
  char* ptr = nullptr;
  Block* prev = nullptr;
  Block* next = nullptr;
  cudaStream_t stream = nullptr;          // its segment's: the device's current stream when that was allocated
  std::vector<cudaStream_t> stream_uses;  // other streams that use it (record_stream)
};

// An event recorded, when a block is freed, on a stream that used it.
struct StreamMarker {
  std::unique_ptr<Event> event;
  bool done() const {
    const cudaError_t e = event->query();
    if (e == cudaErrorNotReady) return false;
    UOE_CUDA_CHECK(kOp, e);
    return true;
  }
  void wait() const { event->synchronize(); }
};

// Free blocks ordered by stream, then size, then address: lower_bound({stream, size}) is the stream's best fit.
struct ByStreamAndSize {
  bool operator()(const Block* a, const Block* b) const {
    if (a->stream != b->stream) return std::less<cudaStream_t>()(a->stream, b->stream);
    return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
  }
};
using FreeBlocks = std::set<Block*, ByStreamAndSize>;

struct DevicePool {
  FreeBlocks small, large;
  AllocatorStats stats;
};

std::string mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", double(bytes) / double(1 << 20));
  return buf;
}

size_t round_up(size_t n, size_t unit) { return (n + unit - 1) / unit * unit; }

class CachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device) override {
    UOE_CHECK(device.is_cuda() && device.index >= 0, "[", kOp, "] asked for memory on ", device.str());
    return allocate_on(device.index, nbytes);
  }

  void* allocate_on(int device, size_t nbytes) {
    if (nbytes == 0) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    DevicePool& pool = pool_for(device);
    pending_.release_completed([this](Block* b) { free_block(b); });
    if (nbytes > kMaxRequest) raise_oom(device, nbytes, cudaErrorMemoryAllocation);
    const bool small = nbytes <= kSmallRequest;
    const size_t size = allocation_size(nbytes);
    FreeBlocks& free_blocks = small ? pool.small : pool.large;

    // Only a block of the current stream's segments: work queued on another stream may still use a block freed
    // there, and nothing orders this stream's work after it.
    const cudaStream_t stream = current_stream(device);
    if (!caching_) return hand_out(pool, new_segment(pool, device, small, nbytes, nbytes, stream));
    Block* block = nullptr;
    Block key;
    key.stream = stream;
    key.size = size;
    auto it = free_blocks.lower_bound(&key);  // the stream's smallest free block of at least `size` bytes
    if (it != free_blocks.end() && (*it)->stream == stream) {
      block = *it;
      free_blocks.erase(it);
    } else {
      block = new_segment(pool, device, small, small ? kSmallSegment : size, nbytes, stream);
    }
    // Split off the rest when it can serve another request of this pool.
    const size_t rest = block->size - size;
    if (rest >= (small ? kSmallRound : kLargeRound)) {
      Block* tail = new Block;
      tail->device = device;
      tail->small = small;
      tail->size = rest;
      tail->ptr = block->ptr + size;
      tail->stream = stream;
      tail->prev = block;
      tail->next = block->next;
      if (block->next) block->next->prev = tail;
      block->next = tail;
      block->size = size;
      free_blocks.insert(tail);
    }
    return hand_out(pool, block);
  }

  void deallocate(void* ptr, size_t) override {
    if (!ptr) return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(ptr);
    UOE_CHECK(it != live_.end(), "[", kOp, "] deallocate of a pointer this allocator did not hand out");
    Block* b = it->second;
    live_.erase(it);
    DevicePool& pool = pools_[size_t(b->device)];
    pool.stats.allocated -= b->size;
    total_.allocated -= b->size;
    if (b->stream_uses.empty()) return free_block(b);
    std::vector<StreamMarker> markers;
    // Without events (the CUDA runtime shutting down at exit) the block stays out of the pool: never reused.
    if (mark_stream_uses(*b, markers)) pending_.add(b, std::move(markers));
  }

  void record_stream(const void* ptr, cudaStream_t stream) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(const_cast<void*>(ptr));
    if (it == live_.end()) return;  // memory this allocator did not hand out: its owner decides when it goes
    Block* b = it->second;
    if (stream != b->stream && std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end())
      b->stream_uses.push_back(stream);
  }

  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return total_;
  }

  std::optional<size_t> available(Device d) const override {
    const int n = device_count();
    UOE_CHECK(d.index >= 0 && d.index < n, "[", kOp, "] ", d.str(), " does not exist (", n, " GPU(s) visible)");
    DeviceGuard guard(d.index);
    size_t free_bytes = 0, total_bytes = 0;
    UOE_CUDA_CHECK(kOp, cudaMemGetInfo(&free_bytes, &total_bytes));
    const AllocatorStats s = device_stats(d.index);
    return free_bytes + (s.reserved - s.allocated);
  }

  bool caching() const { return caching_; }

  AllocatorStats device_stats(int device) const {
    std::lock_guard<std::mutex> lock(mu_);
    if (device < 0 || size_t(device) >= pools_.size()) return {};
    return pools_[size_t(device)].stats;
  }

  // Every device's peak and the process-wide one.
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    for (DevicePool& pool : pools_) pool.stats.peak = pool.stats.allocated;
    total_.peak = total_.allocated;
  }

  void empty_cache() override {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.release_all([this](Block* b) { free_block(b); });
    for (size_t d = 0; d < pools_.size(); ++d) release_cached(int(d));
  }

 private:
  // Larger requests cannot be rounded without overflow; no GPU has that much memory anyway.
  static constexpr size_t kMaxRequest = std::numeric_limits<size_t>::max() / 4;

  // UOE_CUDA_NO_CACHING=1 (for debugging): every request gets a cudaMalloc of its own, returned by cudaFree when
  // it is freed (after the streams that used it), so that compute-sanitizer sees each tensor's own bounds.
  static bool caching_wanted() {
    const char* v = std::getenv("UOE_CUDA_NO_CACHING");
    return !v || !*v || std::strcmp(v, "0") == 0;
  }

  // A block of `bytes` that is a whole new segment of the current stream.
  Block* new_segment(DevicePool& pool, int device, bool small, size_t bytes, size_t requested, cudaStream_t stream) {
    char* ptr = static_cast<char*>(malloc_segment(device, bytes, requested));  // may throw: before the new
    auto* b = new Block;
    b->ptr = ptr;
    b->device = device;
    b->small = small;
    b->size = bytes;
    b->stream = stream;
    pool.stats.reserved += bytes;
    total_.reserved += bytes;
    return b;
  }

  void* hand_out(DevicePool& pool, Block* block) {
    block->allocated = true;
    block->stream_uses.clear();
    live_.emplace(block->ptr, block);
    add_allocated(pool, block->size);
    return block->ptr;
  }

  // Returns a whole segment's memory to CUDA.
  void free_segment(DevicePool& pool, Block* b) {
    DeviceGuard guard(b->device);
    UOE_CUDA_CHECK(kOp, cudaFree(b->ptr));
    pool.stats.reserved -= b->size;
    total_.reserved -= b->size;
    delete b;
  }

  // Returns a block nobody uses any more to its pool (to CUDA without caching).
  void free_block(Block* b) {
    DevicePool& pool = pools_[size_t(b->device)];
    if (!caching_) return free_segment(pool, b);
    FreeBlocks& free_blocks = b->small ? pool.small : pool.large;
    b->allocated = false;
    // Merge with free neighbours of the same segment (erase them from the set before their size changes).
    if (b->prev && !b->prev->allocated) {
      Block* p = b->prev;
      free_blocks.erase(p);
      p->size += b->size;
      p->next = b->next;
      if (b->next) b->next->prev = p;
      delete b;
      b = p;
    }
    if (b->next && !b->next->allocated) {
      Block* n = b->next;
      free_blocks.erase(n);
      b->size += n->size;
      b->next = n->next;
      if (n->next) n->next->prev = b;
      delete n;
    }
    free_blocks.insert(b);
  }

  // One event per stream in b.stream_uses, recorded there now (on b's device); false when one cannot be made.
  static bool mark_stream_uses(const Block& b, std::vector<StreamMarker>& markers) {
    try {
      DeviceGuard guard(b.device);
      for (cudaStream_t s : b.stream_uses) {
        markers.push_back({std::make_unique<Event>()});
        markers.back().event->record(s);
      }
      return true;
    } catch (const Error&) {
      (void)cudaGetLastError();
      return false;
    }
  }

  DevicePool& pool_for(int device) {
    UOE_CHECK(device >= 0 && device < 1024, "[", kOp, "] bad CUDA device index ", device);
    if (pools_.size() <= size_t(device)) pools_.resize(size_t(device) + 1);
    return pools_[size_t(device)];
  }

  void add_allocated(DevicePool& pool, size_t size) {
    pool.stats.allocated += size;
    if (pool.stats.allocated > pool.stats.peak) pool.stats.peak = pool.stats.allocated;
    total_.allocated += size;
    if (total_.allocated > total_.peak) total_.peak = total_.allocated;
  }

  // cudaMalloc of one segment; on out-of-memory, frees the device's cached segments and tries once more.
  void* malloc_segment(int device, size_t segment, size_t requested) {
    DeviceGuard guard(device);
    void* p = nullptr;
    cudaError_t e = cudaMalloc(&p, segment);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      pending_.release_all([this](Block* b) { free_block(b); });
      release_cached(device);
      e = cudaMalloc(&p, segment);
    }
    if (e == cudaErrorMemoryAllocation) raise_oom(device, requested, e);
    check_cuda(e, kOp, "cudaMalloc");
    return p;
  }

  // Returns every segment of `device` that is entirely free (one free block spanning it) to CUDA.
  void release_cached(int device) {
    if (device < 0 || size_t(device) >= pools_.size()) return;
    DevicePool& pool = pools_[size_t(device)];
    std::vector<Block*> whole;
    for (FreeBlocks* set : {&pool.small, &pool.large})
      for (Block* b : *set)
        if (!b->prev && !b->next) whole.push_back(b);
    for (Block* b : whole) {
      (b->small ? pool.small : pool.large).erase(b);
      free_segment(pool, b);
    }
  }

  [[noreturn]] void raise_oom(int device, size_t requested, cudaError_t e) {
    (void)cudaGetLastError();
    DeviceGuard guard(device);
    const AllocatorStats& s = pools_[size_t(device)].stats;
    size_t free_bytes = 0, total_bytes = 0;
    std::string device_info;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess)
      device_info = ", " + mib(free_bytes) + " free of " + mib(total_bytes) + " on the device";
    else
      (void)cudaGetLastError();
    fail("[", kOp, "] out of memory on cuda:", device, ": requested ", mib(requested), ", ", mib(s.allocated),
         " in use by tensors, ", mib(s.reserved), " reserved (cached) by this allocator", device_info, " (",
         cudaGetErrorString(e), "); free tensors that are no longer needed or lower the batch size");
  }

  const bool caching_ = caching_wanted();
  mutable std::mutex mu_;
  std::vector<DevicePool> pools_;
  std::unordered_map<void*, Block*> live_;  // allocated blocks by address
  PendingFrees<Block, StreamMarker> pending_;  // freed blocks that other streams may still use
  AllocatorStats total_;
};

CachingAllocator& instance() {
  static CachingAllocator* a = new CachingAllocator();  // never destroyed: tensors may outlive statics
  return *a;
}

}  // namespace

size_t allocation_size(size_t nbytes) {
  if (nbytes <= kSmallRequest) return round_up(std::max<size_t>(nbytes, 1), kSmallRound);
  return round_up(nbytes, kLargeRound);
}

Allocator& caching_allocator() { return instance(); }

AllocatorStats memory_stats(int device) { return instance().device_stats(device); }

bool caching() { return instance().caching(); }

void* allocate_on(int device, size_t nbytes) { return instance().allocate_on(device, nbytes); }

void record_stream(const void* ptr, cudaStream_t stream) { instance().record_stream(ptr, stream); }

void record_stream(const Tensor& t, cudaStream_t stream) {
  UOE_CHECK(t.defined() && t.is_cuda(), "[record_stream] takes a CUDA tensor, got ",
            t.defined() ? t.device().str() : std::string("an undefined tensor"));
  record_stream(t.storage()->data(), stream);
}

}  // namespace uoe::cuda
