// Allocator interface, the CPU allocator (64-byte aligned, caching) and the per-device registry.
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>

#include "core/device.h"

namespace uoe {

struct AllocatorStats {
  size_t allocated = 0;  // bytes handed out and not yet returned
  size_t reserved = 0;   // bytes held from the system (allocated + cached)
  size_t peak = 0;       // highest `allocated` seen
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  // Memory on `device` (an allocator serves one device type; a CUDA one serves every GPU); never null for
  // nbytes > 0.
  virtual void* allocate(size_t nbytes, Device device) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
  virtual AllocatorStats stats() const = 0;
  virtual void reset_peak() = 0;   // peak := allocated now, so a later peak covers only what runs after
  virtual void empty_cache() = 0;  // returns cached blocks to the system
  // Bytes that allocations on `device` can still get: on a GPU, its free memory and this allocator's unused cached
  // blocks (handed out again before CUDA is asked for more). None where the system's limits decide (the host:
  // core/memory_limits.h).
  virtual std::optional<size_t> available(Device) const { return std::nullopt; }
};

// The allocator that serves `device`; cuda devices raise an error in a CPU-only build.
Allocator& allocator_for(Device device);
// Installed by the CUDA backend at start-up.
void register_cuda_allocator(Allocator* a);

constexpr size_t kCpuAlignment = 64;

}  // namespace uoe
