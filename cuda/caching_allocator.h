// Caching device allocator: per-device pools of cudaMalloc'ed segments, split into blocks, cached on free.
//
// Requests of at most kSmallRequest bytes are rounded up to kSmallRound and carved out of kSmallSegment
// segments; larger ones are rounded up to kLargeRound and get a segment of their own size. A freed block goes
// back to its device's pool (merged with free neighbours of the same segment) and the best-fitting free block
// (the smallest one large enough, split when the rest is at least one rounding unit) serves the next request,
// so training steps reuse memory without calling cudaMalloc/cudaFree. When cudaMalloc fails, the device's
// fully free segments are released and the call is retried once; then the error names the numbers.
//
// Streams: a segment belongs to the stream current when it was allocated, and so do its blocks. A freed block is
// reusable at once, by requests on its stream only: their work is issued after the free, in that stream's order
// (the library's default stream orders everything: cuda/stream.h), while work still queued where the block was used
// could overwrite what another stream writes there (as PyTorch, whose caching allocator also keeps blocks per
// stream). A request on another stream is served from that stream's segments. A block that work on another stream
// also uses is marked with record_stream (as PyTorch's Tensor.record_stream): its free then records an event on each
// such stream, and the block goes back to the pool only once those events have completed (polled on later
// allocations; empty_cache and the retry after a failed cudaMalloc wait for them). Its bytes leave `allocated` at
// the free. Allocator::allocate serves the device it is asked for (a tensor's own), whatever the current one.
// Thread-safe (one mutex).
//
// UOE_CUDA_NO_CACHING=1 in the environment (read once): no caching, for debugging. Every request gets a cudaMalloc
// of its own and goes back with cudaFree when freed (after the other streams that used it), so that
// compute-sanitizer's memcheck sees every tensor's own bounds (inside a cached segment, a read past a tensor's end
// reads its neighbour, and nothing is reported). Slow: each free waits for the device.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "core/allocator.h"

namespace uoe {
class Tensor;
}

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
// Whether the allocator caches (false when UOE_CUDA_NO_CACHING=1 was set at the start).
bool caching();
// Allocates on device `device` (as Allocator::allocate with Device::cuda(device)); freed with deallocate().
void* allocate_on(int device, size_t nbytes);

// Marks the block at `ptr` (as handed out) as used by work queued on `stream`, so that freeing it does not make it
// reusable before that work is done. The block's own stream, or memory this allocator did not hand out, is left
// as it is.
void record_stream(const void* ptr, cudaStream_t stream);
// The same for a CUDA tensor's storage (a view marks its whole storage).
void record_stream(const Tensor& t, cudaStream_t stream);

}  // namespace uoe::cuda
