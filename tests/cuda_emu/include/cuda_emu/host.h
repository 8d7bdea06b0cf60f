// The host side of the CPU stand-in for CUDA (tests/cuda_emu): devices, memory, streams, events and kernel launches,
// as the CUDA runtime API documents them, on the CPU.
//
// - Four devices of 4 GiB each (cudaMemGetInfo counts what cudaMalloc handed out). Device memory is host memory that
//   only device work may touch: it is mapped without access, and opened while queued work (kernels, copies,
//   memsets, cuBLAS) runs; so host code that reads or writes it directly crashes here (SIGSEGV, at the line that
//   did it) as it would on a GPU. Each allocation ends at an inaccessible page, so a read past its end crashes too.
// - Work is asynchronous: a kernel, copy or memset issued to a stream is queued, and runs only when the host waits
//   for it (cudaStreamSynchronize, cudaEventSynchronize, cudaDeviceSynchronize, cudaFree, a copy to pageable host
//   memory), or when work it is ordered before runs. Reading results without waiting reads stale memory, as a
//   GPU that has not got there yet would. Streams keep CUDA's ordering: the legacy default stream (nullptr) waits for
//   the blocking streams of its device and they for it; cudaStreamNonBlocking streams only for events they wait on.
// - A launch is checked as the driver checks it (block size, grid size, dynamic shared memory at most 227 KiB as on
//   an H100 or H200; not whether the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize allows it); a bad one
//   sets the error cudaGetLastError returns and runs nothing.
// - Collectives (the NCCL stand-in, nccl.h) are queued work that can run only once every rank, a host thread each,
//   has issued its part; a host thread that waits for one before then waits without the lock, at most 60 s.
// Everything is behind one lock; work runs on the host thread that waits for it.
#pragma once
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <vector>

#include "cuda_emu/blocks.h"

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
};
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaMemoryType { cudaMemoryTypeUnregistered = 0, cudaMemoryTypeHost = 1, cudaMemoryTypeDevice = 2 };
struct cudaPointerAttributes {
  cudaMemoryType type;
  int device;
  void* devicePointer;
  void* hostPointer;
};
constexpr unsigned cudaStreamDefault = 0, cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDefault = 0, cudaEventDisableTiming = 2;

struct CUstream_st;
using cudaStream_t = CUstream_st*;
struct CUevent_st;
using cudaEvent_t = CUevent_st*;

namespace uoe::cuda_emu {

constexpr int kDevices = 4;
constexpr size_t kDeviceBytes = size_t(4) << 30;
constexpr size_t kMaxSmemOptin = 227 << 10;

// One queued piece of work, the work of other streams it waits for: (stream, how many of its items), and, for a
// collective, whether it can run yet (every rank has issued its part).
struct Item {
  std::function<void()> work;
  std::vector<std::pair<CUstream_st*, uint64_t>> waits;
  std::function<bool()> ready;  // empty: always
};

}  // namespace uoe::cuda_emu

struct CUstream_st {
  int device = 0;
  bool blocking = true;
  bool legacy = false;
  std::deque<uoe::cuda_emu::Item> queue;
  uint64_t issued = 0, done = 0;  // items issued to the stream, and run
  uint64_t taken = 0;             // items taken from the queue to run (done, or one more while it runs)
};
struct CUevent_st {
  CUstream_st* stream = nullptr;  // where it was last recorded (nullptr: never)
  uint64_t item = 0;              // complete once the stream has run this many items
  bool timing = true;
  std::chrono::steady_clock::time_point when{};
  int records_queued = 0;  // records not yet run: a destroyed event lives until they have
  bool destroyed = false;
};

namespace uoe::cuda_emu {

enum class Memory { device, pinned };
struct Allocation {
  size_t bytes;
  int device;
  Memory kind;
  void* mapping = nullptr;  // device memory: its pages, then one inaccessible page
  size_t mapped = 0;        // bytes of those pages, without the last
};

struct State {
  std::recursive_mutex mu;
  std::array<CUstream_st, kDevices> legacy;
  std::set<CUstream_st*> streams;  // every live stream, the legacy ones included
  std::map<uintptr_t, Allocation> allocations;
  std::array<size_t, kDevices> used{};
  int device_access = 0;  // how many DeviceAccess are open: device memory is accessible while any is
  std::condition_variable_any issued;  // notified whenever work is queued (a collective may have become ready)
  State() {
    for (int d = 0; d < kDevices; ++d) {
      legacy[size_t(d)].device = d, legacy[size_t(d)].legacy = true;
      streams.insert(&legacy[size_t(d)]);
    }
  }
};
inline State& state() {
  static auto* s = new State();  // never destroyed: static destructors elsewhere may still free device memory
  return *s;
}
inline thread_local int t_device = 0;
inline thread_local cudaError_t t_last_error = cudaSuccess;

// Records a failed call's error for cudaGetLastError, and returns it.
inline cudaError_t fail_with(cudaError_t e) {
  t_last_error = e;
  return e;
}

inline CUstream_st* resolve(cudaStream_t s) { return s ? s : &state().legacy[size_t(t_device)]; }

// Device memory is accessible while one of these is open (queued work runs inside one); else any access faults.
class DeviceAccess {
 public:
  DeviceAccess() {
    if (state().device_access++ == 0) protect(PROT_READ | PROT_WRITE);
  }
  ~DeviceAccess() {
    if (--state().device_access == 0) protect(PROT_NONE);
  }
  DeviceAccess(const DeviceAccess&) = delete;
  DeviceAccess& operator=(const DeviceAccess&) = delete;
  static int current() { return state().device_access ? PROT_READ | PROT_WRITE : PROT_NONE; }

 private:
  static void protect(int access) {
    for (const auto& [address, a] : state().allocations)
      if (a.kind == Memory::device && mprotect(a.mapping, a.mapped, access) != 0)
        fault("mprotect of device memory failed");
  }
};

// Runs `s`'s queued work until it has run `upto` items (and, first, whatever each item waits for); false when it
// stopped at a collective that not every rank has issued yet.
inline bool run_until(CUstream_st* s, uint64_t upto) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  if (s->done >= upto) return true;
  DeviceAccess access;
  while (s->done < upto) {
    const Item& next = s->queue.front();
    for (auto [other, n] : next.waits)
      if (!run_until(other, n)) return false;
    if (next.ready && !next.ready()) return false;
    Item item = std::move(s->queue.front());
    s->queue.pop_front();
    ++s->taken;
    if (item.work) item.work();
    ++s->done;
  }
  return true;
}
inline bool run_all(CUstream_st* s) { return run_until(s, s->issued); }

// Item i (1-based) of `s` while it is queued; null once taken to run.
inline const Item* queued_item(const CUstream_st* s, uint64_t i) {
  return i > s->taken && i <= s->issued ? &s->queue[size_t(i - s->taken - 1)] : nullptr;
}

// Whether run_until(s, upto) would get there without stopping at a collective; runs nothing.
inline bool can_run(const CUstream_st* s, uint64_t upto) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  for (uint64_t i = s->taken + 1; i <= std::min(upto, s->issued); ++i) {
    const Item& item = *queued_item(s, i);
    for (auto [other, n] : item.waits)
      if (!can_run(other, n)) return false;
    if (item.ready && !item.ready()) return false;
  }
  return true;
}
inline bool run_device(int device) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  for (CUstream_st* s : state().streams)
    if (s->device == device && !run_all(s)) return false;
  return true;
}

// How a host thread waits for device work: runs it with `runs` (one of the above) and, while that stops at a
// collective other ranks have not issued, waits for them without the lock. The caller must not hold the lock.
template <class Runs>
void wait_for(const char* call, const Runs& runs) {
  std::unique_lock<std::recursive_mutex> lock(state().mu);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!runs())
    if (state().issued.wait_until(lock, deadline) == std::cv_status::timeout && !runs())
      return fault(std::string(call) + " waits for a collective that another rank has not issued within 60 s");
}

// Queues `work` on `stream`, after what CUDA orders before it (and, for a collective, once `ready`); returns the
// item's number (1-based).
inline uint64_t enqueue(cudaStream_t stream, std::function<void()> work, std::function<bool()> ready = {}) {
  State& st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mu);
  CUstream_st* s = resolve(stream);
  Item item{std::move(work), {}, std::move(ready)};
  if (s->legacy) {  // the legacy stream waits for every blocking stream of its device
    for (CUstream_st* o : st.streams)
      if (o != s && o->blocking && o->device == s->device) item.waits.emplace_back(o, o->issued);
  } else if (s->blocking) {  // ... and they for it
    CUstream_st* l = &st.legacy[size_t(s->device)];
    item.waits.emplace_back(l, l->issued);
  }
  s->queue.push_back(std::move(item));
  st.issued.notify_all();
  return ++s->issued;
}

inline const Allocation* find_allocation(const void* p) {
  auto& a = state().allocations;
  auto it = a.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == a.begin()) return nullptr;
  --it;
  return reinterpret_cast<uintptr_t>(p) < it->first + it->second.bytes ? &it->second : nullptr;
}

// Whether a copy touches pageable host memory (neither device nor cudaMallocHost memory).
inline bool pageable(const void* p) { return find_allocation(p) == nullptr; }

// A kernel launch (the form tests/cuda_emu/tools/rewrite_launches.cpp writes `kernel<<<...>>>(args)` in): checked as
// the driver checks it, then queued with the arguments as they are at the launch; `call` calls the kernel with them.
template <class Call>
struct Launch {
  Call call;
  dim3 grid, block;
  size_t smem;
  cudaStream_t stream;
  template <class... Args>
  void operator()(Args&&... args) const {
    if (cudaError_t e = check(); e != cudaSuccess) return (void)fail_with(e);
    enqueue(stream, [call = call, grid = grid, block = block, smem = smem,
                     values = std::tuple<std::decay_t<Args>...>(std::forward<Args>(args)...)] {
      launch(grid, block, [&] { std::apply(call, values); }, smem);
    });
  }
  cudaError_t check() const {
    const uint64_t threads = uint64_t(block.x) * block.y * block.z;
    if (threads == 0 || threads > kMaxThreads || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
        grid.x > 0x7fffffffu || grid.y > 65535 || grid.z > 65535)
      return cudaErrorInvalidConfiguration;
    return smem > kMaxSmemOptin ? cudaErrorInvalidValue : cudaSuccess;
  }
};
template <class Call>
Launch<Call> launch_kernel(Call call, dim3 grid, dim3 block, size_t smem = 0, cudaStream_t stream = nullptr) {
  return {call, grid, block, smem, stream};
}

}  // namespace uoe::cuda_emu

// ---- the runtime API ------------------------------------------------------------------------------------------

inline cudaError_t cudaGetLastError() { return std::exchange(uoe::cuda_emu::t_last_error, cudaSuccess); }
inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
  }
  return "cudaErrorUnknown";
}
inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
  }
  return "unknown error";
}

inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = uoe::cuda_emu::kDevices;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* d) {
  *d = uoe::cuda_emu::t_device;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int d) {
  if (d < 0 || d >= uoe::cuda_emu::kDevices) return uoe::cuda_emu::fail_with(cudaErrorInvalidDevice);
  uoe::cuda_emu::t_device = d;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (device < 0 || device >= uoe::cuda_emu::kDevices) return uoe::cuda_emu::fail_with(cudaErrorInvalidDevice);
  if (attr != cudaDevAttrMaxSharedMemoryPerBlockOptin) return uoe::cuda_emu::fail_with(cudaErrorInvalidValue);
  *value = int(uoe::cuda_emu::kMaxSmemOptin);
  return cudaSuccess;
}
template <class... Params>
cudaError_t cudaFuncSetAttribute(void (*)(Params...), cudaFuncAttribute attr, int value) {
  using namespace uoe::cuda_emu;
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize || value < 0 || size_t(value) > kMaxSmemOptin)
    return fail_with(cudaErrorInvalidValue);
  return cudaSuccess;
}

// ---- memory ----

inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  using namespace uoe::cuda_emu;
  State& st = state();
  std::lock_guard<std::recursive_mutex> lock(st.mu);
  const size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  if (rounded > kDeviceBytes - st.used[size_t(t_device)]) return fail_with(cudaErrorMemoryAllocation);
  const size_t page = size_t(sysconf(_SC_PAGESIZE)), mapped = (rounded + page - 1) / page * page;
  void* mapping = mmap(nullptr, mapped + page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) return fail_with(cudaErrorMemoryAllocation);
  if (mprotect(mapping, mapped, DeviceAccess::current()) != 0) fault("mprotect of device memory failed");
  *p = static_cast<unsigned char*>(mapping) + (mapped - rounded);  // ends at the inaccessible page
  st.allocations[reinterpret_cast<uintptr_t>(*p)] = {rounded, t_device, Memory::device, mapping, mapped};
  st.used[size_t(t_device)] += rounded;
  return cudaSuccess;
}
// Waits for the device's work first, as cudaFree does.
inline cudaError_t cudaFree(void* p) {
  using namespace uoe::cuda_emu;
  if (!p) return cudaSuccess;
  State& st = state();
  std::unique_lock<std::recursive_mutex> lock(st.mu);
  auto it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end() || it->second.kind != Memory::device) return fail_with(cudaErrorInvalidValue);
  const int device = it->second.device;
  lock.unlock();
  wait_for("cudaFree", [device] { return run_device(device); });
  lock.lock();
  it = st.allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == st.allocations.end()) return fail_with(cudaErrorInvalidValue);  // freed by another thread meanwhile
  st.used[size_t(it->second.device)] -= it->second.bytes;
  munmap(it->second.mapping, it->second.mapped + size_t(sysconf(_SC_PAGESIZE)));
  st.allocations.erase(it);
  return cudaSuccess;
}
inline cudaError_t cudaMallocHost(void** p, size_t bytes) {
  using namespace uoe::cuda_emu;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  const size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
  *p = ::operator new[](rounded, std::align_val_t(256));
  state().allocations[reinterpret_cast<uintptr_t>(*p)] = {rounded, t_device, Memory::pinned};
  return cudaSuccess;
}
inline cudaError_t cudaFreeHost(void* p) {
  using namespace uoe::cuda_emu;
  if (!p) return cudaSuccess;
  wait_for("cudaFreeHost", [] {  // as cudaFreeHost, which waits for the work using it
    for (CUstream_st* s : state().streams)
      if (!run_all(s)) return false;
    return true;
  });
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  auto it = state().allocations.find(reinterpret_cast<uintptr_t>(p));
  if (it == state().allocations.end() || it->second.kind != Memory::pinned) return fail_with(cudaErrorInvalidValue);
  state().allocations.erase(it);
  ::operator delete[](p, std::align_val_t(256));
  return cudaSuccess;
}
inline cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  using namespace uoe::cuda_emu;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  *total_bytes = kDeviceBytes;
  *free_bytes = kDeviceBytes - state().used[size_t(t_device)];
  return cudaSuccess;
}
inline cudaError_t cudaPointerGetAttributes(cudaPointerAttributes* a, const void* p) {
  using namespace uoe::cuda_emu;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  const Allocation* alloc = find_allocation(p);
  *a = {cudaMemoryTypeUnregistered, -1, nullptr, const_cast<void*>(p)};
  if (alloc) {
    a->type = alloc->kind == Memory::device ? cudaMemoryTypeDevice : cudaMemoryTypeHost;
    a->device = alloc->device;
    a->devicePointer = const_cast<void*>(p);
    a->hostPointer = alloc->kind == Memory::pinned ? const_cast<void*>(p) : nullptr;
  }
  return cudaSuccess;
}

// A copy from pageable host memory reads it at the call (CUDA stages it); one to pageable host memory returns once
// it is done; copies between device or pinned memory run in stream order.
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t n, cudaMemcpyKind, cudaStream_t stream = nullptr) {
  using namespace uoe::cuda_emu;
  if (n == 0) return cudaSuccess;
  std::unique_lock<std::recursive_mutex> lock(state().mu);
  uint64_t item = 0;
  if (pageable(src)) {
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(src),
                                                              static_cast<const unsigned char*>(src) + n);
    item = enqueue(stream, [dst, staged] { std::memcpy(dst, staged->data(), staged->size()); });
  } else {
    item = enqueue(stream, [dst, src, n] { std::memmove(dst, src, n); });
  }
  const bool to_pageable = pageable(dst);
  lock.unlock();
  if (to_pageable) wait_for("cudaMemcpyAsync", [s = resolve(stream), item] { return run_until(s, item); });
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t n, cudaMemcpyKind kind) {
  using namespace uoe::cuda_emu;
  if (cudaError_t e = cudaMemcpyAsync(dst, src, n, kind, nullptr); e != cudaSuccess) return e;
  wait_for("cudaMemcpy", [s = resolve(nullptr)] { return run_all(s); });
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t n, cudaStream_t stream = nullptr) {
  if (n) uoe::cuda_emu::enqueue(stream, [p, value, n] { std::memset(p, value, n); });
  return cudaSuccess;
}
inline cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int value, size_t width, size_t height,
                                     cudaStream_t stream = nullptr) {
  if (width > pitch && height > 1) return uoe::cuda_emu::fail_with(cudaErrorInvalidValue);
  uoe::cuda_emu::enqueue(stream, [=] {
    for (size_t r = 0; r < height; ++r) std::memset(static_cast<unsigned char*>(p) + r * pitch, value, width);
  });
  return cudaSuccess;
}

// ---- streams and events ----

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  using namespace uoe::cuda_emu;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  *s = new CUstream_st();
  (*s)->device = t_device;
  (*s)->blocking = (flags & cudaStreamNonBlocking) == 0;
  state().streams.insert(*s);
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
// Queued work still runs (as on a GPU, where it completes after the stream is destroyed).
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  using namespace uoe::cuda_emu;
  std::unique_lock<std::recursive_mutex> lock(state().mu);
  if (!s || !state().streams.count(s)) return fail_with(cudaErrorInvalidResourceHandle);
  lock.unlock();
  wait_for("cudaStreamDestroy", [s] { return run_all(s); });
  lock.lock();
  state().streams.erase(s);
  delete s;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  using namespace uoe::cuda_emu;
  wait_for("cudaStreamSynchronize", [st = resolve(s)] { return run_all(st); });
  return cudaSuccess;
}
inline cudaError_t cudaStreamQuery(cudaStream_t s) {
  std::lock_guard<std::recursive_mutex> lock(uoe::cuda_emu::state().mu);
  const CUstream_st* st = uoe::cuda_emu::resolve(s);
  return st->done == st->issued ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t cudaDeviceSynchronize() {
  using namespace uoe::cuda_emu;
  wait_for("cudaDeviceSynchronize", [d = t_device] { return run_device(d); });
  return cudaSuccess;
}
inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned flags) {
  *e = new CUevent_st();
  (*e)->timing = (flags & cudaEventDisableTiming) == 0;
  return cudaSuccess;
}
// As in CUDA, an event destroyed while a record of it is queued is released once that record has run.
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  std::lock_guard<std::recursive_mutex> lock(uoe::cuda_emu::state().mu);
  if (e->records_queued > 0)
    e->destroyed = true;
  else
    delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t stream = nullptr) {
  using namespace uoe::cuda_emu;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  e->stream = resolve(stream);
  ++e->records_queued;
  e->item = enqueue(stream, [e] {
    e->when = std::chrono::steady_clock::now();
    if (--e->records_queued == 0 && e->destroyed) delete e;
  });
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t e) {
  std::lock_guard<std::recursive_mutex> lock(uoe::cuda_emu::state().mu);
  return !e->stream || e->stream->done >= e->item ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
  using namespace uoe::cuda_emu;
  if (e->stream) wait_for("cudaEventSynchronize", [e] { return run_until(e->stream, e->item); });
  return cudaSuccess;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t e, unsigned = 0) {
  using namespace uoe::cuda_emu;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  CUstream_st* s = resolve(stream);
  if (!e->stream) return cudaSuccess;
  enqueue(stream, {});
  s->queue.back().waits.emplace_back(e->stream, e->item);
  return cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!start->timing || !end->timing || !start->stream || !end->stream)
    return uoe::cuda_emu::fail_with(cudaErrorInvalidResourceHandle);
  if (cudaEventQuery(start) != cudaSuccess || cudaEventQuery(end) != cudaSuccess) return cudaErrorNotReady;
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}
