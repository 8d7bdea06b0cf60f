// Pinned staging ring for host-to-device uploads (cuda/host_upload.h).
#include "cuda/host_upload.h"

#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "cuda/check.h"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

constexpr size_t kRingSize = 32;

struct Staging {
  void* host = nullptr;  // pinned
  size_t capacity = 0;
  std::unique_ptr<Event> copied;  // recorded after the buffer's last copy
};

struct Ring {
  std::array<Staging, kRingSize> slots;
  size_t next = 0;
};

// Never destroyed: uploads may run during static destruction, and the CUDA context may be gone at exit.
std::mutex g_mu;
std::map<int, Ring>& rings() {
  static auto* r = new std::map<int, Ring>();
  return *r;
}

size_t round_up_pow2(size_t n) {
  size_t c = 4096;
  while (c < n) c *= 2;
  return c;
}

}  // namespace

void upload_async(void* dst, const void* src, size_t bytes, int device, cudaStream_t stream, const char* op) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  std::lock_guard<std::mutex> lock(g_mu);
  Ring& ring = rings()[device];
  Staging& s = ring.slots[ring.next];
  ring.next = (ring.next + 1) % kRingSize;
  if (s.copied) {
    s.copied->synchronize();  // its previous copy has run
  } else {
    s.copied = std::make_unique<Event>();
  }
  if (s.capacity < bytes) {
    if (s.host) UOE_CUDA_CHECK(op, cudaFreeHost(s.host));
    s.host = nullptr;
    s.capacity = 0;
    const size_t capacity = round_up_pow2(bytes);
    UOE_CUDA_CHECK(op, cudaMallocHost(&s.host, capacity));
    s.capacity = capacity;
  }
  std::memcpy(s.host, src, bytes);
  UOE_CUDA_CHECK(op, cudaMemcpyAsync(dst, s.host, bytes, cudaMemcpyHostToDevice, stream));
  s.copied->record(stream);
}

}  // namespace uoe::cuda
