// Caching device allocator: per-device pools of cudaMalloc'ed segments, split into blocks, cached on free.
//
// Requests of at most kSmallRequest bytes are rounded up to kSmallRound and carved out of kSmallSegment
// segments; larger ones are rounded up to kLargeRound and get a segment of their own size. A freed block goes
// back to its device's pool (merged with free neighbours of the same segment) and the best-fitting free block
// (the smallest one large enough, split when the rest is at least one rounding unit) serves the next request,
// so training steps reuse memory without calling cudaMalloc/cudaFree. When cudaMalloc fails, the device's
// fully free segments are released and the call is retried once; then the error names the numbers.
//
// Streams: a freed block is reusable at once. That is safe while all work runs on one stream in issue order
// (the library's default: cuda/stream.h); a tensor used on another stream must have that work ordered before
// it is freed. Allocator::allocate serves the device it is asked for (a tensor's own), whatever the current
// one. Thread-safe (one mutex).
#pragma once
#include <cstddef>

#include "core/allocator.h"

namespace uoe::cuda {

constexpr size_t kSmallRequest = size_t(1) << 20;  // requests up to 1 MiB come from small segments
constexpr size_t kSmallRound = 512;
constexpr size_t kSmallSegment = size_t(1) << 20;
constexpr size_t kLargeRound = size_t(2) << 20;

// The bytes a request of nbytes occupies (what `allocated` grows by).
size_t allocation_size(size_t nbytes);

// The process-wide caching allocator (registered as the CUDA allocator when a GPU is visible). stats(),
// reset_peak() and empty_cache() cover every device.
Allocator& caching_allocator();
// Statistics of one device's pool.
AllocatorStats memory_stats(int device);
// Allocates on device `device` (as Allocator::allocate with Device::cuda(device)); freed with deallocate().
void* allocate_on(int device, size_t nbytes);

}  // namespace uoe::cuda
