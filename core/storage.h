// Storage: one device-resident byte buffer shared by a tensor and its views, from the device's allocator (or
// memory released by its owner's callback, such as a mapped file).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>

#include "core/allocator.h"
#include "core/device.h"

namespace uoe {

class Storage {
 public:
  Storage(size_t nbytes, Device device);
  // Memory the allocator did not give (e.g. part of a mapped file): `release` runs when the storage dies.
  Storage(void* data, size_t nbytes, Device device, std::function<void()> release);
  ~Storage();
  Storage(const Storage&) = delete;
  Storage& operator=(const Storage&) = delete;

  void* data() const { return data_; }
  size_t nbytes() const { return nbytes_; }
  Device device() const { return device_; }
  // Bumped by every in-place write; autograd compares it with the version saved for backward.
  uint64_t version() const { return version_.load(std::memory_order_relaxed); }
  void bump_version() { version_.fetch_add(1, std::memory_order_relaxed); }

 private:
  void* data_ = nullptr;
  size_t nbytes_ = 0;
  Device device_;
  std::function<void()> release_;  // set for memory the allocator did not give
  std::atomic<uint64_t> version_{0};
};

}  // namespace uoe
