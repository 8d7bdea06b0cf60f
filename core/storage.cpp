// Storage allocation and release through the device's allocator.
#include "core/storage.h"

namespace uoe {

Storage::Storage(size_t nbytes, Device device) : nbytes_(nbytes), device_(device) {
  if (nbytes_ > 0) data_ = allocator_for(device_).allocate(nbytes_, device_);
}

Storage::Storage(void* data, size_t nbytes, Device device, std::function<void()> release)
    : data_(data), nbytes_(nbytes), device_(device), release_(std::move(release)) {}

Storage::~Storage() {
  if (release_) release_();
  else if (data_) allocator_for(device_).deallocate(data_, nbytes_);
}

}  // namespace uoe
