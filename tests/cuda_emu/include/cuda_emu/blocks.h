// The thread blocks of the CPU stand-in for CUDA (tests/cuda_emu): how a grid runs on the CPU.
//
// Blocks run one after another, in order, or in reverse order with UOE_EMU_BLOCKS=reversed: a kernel whose result
// depends on the order (two blocks writing one element without an atomic, a block reading what another writes) then
// gives another result (ctest's CudaBlocksReversed entry). The threads of a block are fibers on the calling OS
// thread, each with its own stack (switched by tests/cuda_emu/support/fiber_switch.cpp on x86-64, by ucontext
// elsewhere): a thread runs until it finishes or waits at a barrier (__syncthreads, or a warp-collective step such
// as a shuffle), then the next runnable one runs. The first pass runs the threads in order, the next passes in
// reverse order, so that a read of what another thread writes without a barrier between sees a different outcome
// depending on which of the two comes first. A barrier that some threads never reach (the others finished or wait at
// another) is reported as a deadlock. Each block has its own dynamic shared memory, filled with 0xff bytes (NaN as
// float or bfloat16) so that a read of shared memory nothing wrote shows, and followed by a guard as large again (at
// least 4 KiB) whose change fails the running test. A violated precondition fails the running test (fault()).
#pragma once
#include <gtest/gtest.h>
#include <ucontext.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define UOE_EMU_ASAN 1
#else
#define UOE_EMU_ASAN 0
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
extern "C" void AnnotateIgnoreReadsBegin(const char* file, int line);
extern "C" void AnnotateIgnoreReadsEnd(const char* file, int line);
extern "C" void AnnotateIgnoreWritesBegin(const char* file, int line);
extern "C" void AnnotateIgnoreWritesEnd(const char* file, int line);
#define UOE_EMU_TSAN 1
// What switches threads (ThreadSanitizer's or the stack) is uninstrumented, so that each of ThreadSanitizer's shadow
// call stacks (of fixed size) gets as many exits as entries: none is entered on one thread and left on another, and a
// fiber's first frame, which never returns, is never entered.
#define UOE_EMU_UNINSTRUMENTED __attribute__((no_sanitize("thread")))
#else
#define UOE_EMU_TSAN 0
#define UOE_EMU_UNINSTRUMENTED
#endif

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x = 1, unsigned y = 1, unsigned z = 1) : x(x), y(y), z(z) {}
};
inline thread_local uint3 threadIdx, blockIdx, blockDim, gridDim;

namespace uoe::cuda_emu {

// A violated precondition the emulation found (a shared address out of range, a write past the shared memory, a
// deadlock, a bad launch): a failure of the running test.
inline void fault(const std::string& what) { ADD_FAILURE() << "CUDA emulation: " << what; }

constexpr size_t kSlotBytes = 64;        // what one lane can publish in a warp-collective step
constexpr size_t kStackBytes = 256 << 10;  // per thread
constexpr unsigned kMaxThreads = 1024;   // per block
constexpr unsigned char kGuardByte = 0xa5;

// A barrier of `expected` fibers: the last to arrive releases the others. ThreadSanitizer's token for a generation
// is tokens[generation % 2]: a fiber can arrive for the next generation before the others have left this one.
struct Barrier {
  unsigned expected = 0, arrived = 0, generation = 0;
  char tokens[2] = {};
};

// Where a fiber (or the scheduler) continues: a saved stack pointer, or elsewhere than x86-64 a ucontext.
struct Context {
#if defined(__x86_64__)
  void* sp = nullptr;
#else
  ucontext_t uc;
#endif
};

// AddressSanitizer is told of every stack change (its fiber interface): a switch starts with the destination stack's
// bounds and ends, on the destination, with the bounds of the stack left (the scheduler's are kept for the way
// back). Without AddressSanitizer these do nothing.
struct AsanSwitch {
#if UOE_EMU_ASAN
  void* fake = nullptr;
  void start(const void* bottom, size_t size, bool leaving_for_good) {
    __sanitizer_start_switch_fiber(leaving_for_good ? nullptr : &fake, bottom, size);
  }
  void finish(const void** from_bottom = nullptr, size_t* from_size = nullptr) {
    __sanitizer_finish_switch_fiber(fake, from_bottom, from_size);
  }
#else
  void start(const void*, size_t, bool) {}
  void finish(const void** = nullptr, size_t* = nullptr) {}
#endif
};

// ThreadSanitizer (scripts/race_check.sh) sees every GPU thread as a thread of its own (its fiber interface), so it
// reports two threads' conflicting accesses, in shared or global memory, that no barrier, warp-collective step or
// atomic orders, whichever order the fibers happened to run in. Switches between fibers order nothing; what does:
// __syncthreads and warp-collective steps (release on arrival, acquire on leaving), atomics (instrumented as such),
// and the order of blocks: the host's work before a block comes before every thread of the block, and every thread
// before the host's work after it. So races within a block are reported and races between blocks are not (the
// stand-in's static __shared__ arrays are one memory for every block). The emulation's own bookkeeping (Ignore) is not
// checked. Without ThreadSanitizer these do nothing.
namespace tsan {
#if UOE_EMU_TSAN
inline void* create_thread() { return __tsan_create_fiber(0); }
inline void* current_thread() { return __tsan_get_current_fiber(); }
UOE_EMU_UNINSTRUMENTED inline void switch_to(void* t) { __tsan_switch_to_fiber(t, __tsan_switch_to_fiber_no_sync); }
inline void release(const void* token) { __tsan_release(const_cast<void*>(token)); }
inline void acquire(const void* token) { __tsan_acquire(const_cast<void*>(token)); }
// An access the stand-in performs later than the hardware may (an asynchronous copy's), told to ThreadSanitizer now.
// (GCC declares __tsan_read_range and __tsan_write_range itself under -fsanitize=thread.)
inline void reads(const void* p, size_t bytes) { __tsan_read_range(const_cast<void*>(p), long(bytes)); }
inline void writes(void* p, size_t bytes) { __tsan_write_range(p, long(bytes)); }
struct Ignore {
  Ignore() { AnnotateIgnoreReadsBegin(__FILE__, __LINE__), AnnotateIgnoreWritesBegin(__FILE__, __LINE__); }
  ~Ignore() { AnnotateIgnoreWritesEnd(__FILE__, __LINE__), AnnotateIgnoreReadsEnd(__FILE__, __LINE__); }
  Ignore(const Ignore&) = delete;
  Ignore& operator=(const Ignore&) = delete;
};
#else
inline void* create_thread() { return nullptr; }
inline void* current_thread() { return nullptr; }
inline void switch_to(void*) {}
inline void release(const void*) {}
inline void acquire(const void*) {}
inline void reads(const void*, size_t) {}
inline void writes(void*, size_t) {}
struct Ignore {
  Ignore() {}  // user-provided: a scope, not an unused variable
};
#endif
}  // namespace tsan

struct Fiber {
  Context context;
  uint3 thread;
  unsigned warp_steps = 0;  // warp-collective steps taken (they alternate between two sets of slots)
  bool done = false;
  const Barrier* waiting = nullptr;  // the barrier this fiber waits at, if any
  unsigned waiting_generation = 0;
  AsanSwitch asan;
  std::vector<std::shared_ptr<void>> locals;  // per-thread state of stand-in headers (thread_local<T>())
};

struct SmemFree {
  void operator()(unsigned char* p) const { ::operator delete[](p, std::align_val_t(128)); }
};

struct Block {
  using Slot = std::array<unsigned char, kSlotBytes>;
  Block(unsigned threads, size_t smem_bytes)
      : fibers(threads), warps((threads + 31) / 32), slots{std::vector<Slot>(threads), std::vector<Slot>(threads)},
        smem_bytes(smem_bytes), guard_bytes(std::max<size_t>(smem_bytes, 4096)),
        smem(static_cast<unsigned char*>(::operator new[](smem_bytes + guard_bytes, std::align_val_t(128)))) {
    sync.expected = threads;
    for (unsigned w = 0; w < warps.size(); ++w) warps[w].expected = std::min(32u, threads - 32 * w);
    std::memset(smem.get(), 0xff, smem_bytes);
    std::memset(smem.get() + smem_bytes, kGuardByte, guard_bytes);
  }
  bool guard_intact() const {
    for (size_t i = 0; i < guard_bytes; ++i)
      if (smem[smem_bytes + i] != kGuardByte) return false;
    return true;
  }
  std::vector<Fiber> fibers;
  std::vector<Barrier> warps;  // one per warp of 32 (the last may be partial)
  Barrier sync;                // __syncthreads
  std::vector<Slot> slots[2];  // two sets of one per thread, for warp-collective steps
  size_t smem_bytes;
  size_t guard_bytes;                               // as many again (at least 4 KiB), after it
  std::unique_ptr<unsigned char[], SmemFree> smem;  // the dynamic shared memory, then the guard
  Fiber* current = nullptr;
  Context scheduler;
  void* scheduler_tsan_thread = nullptr;  // the host's ThreadSanitizer thread
  const void* launched = nullptr;         // ThreadSanitizer's tokens: the host's work before the block, the threads'
  const void* finished = nullptr;         // work before they end
  const void* scheduler_stack = nullptr;  // its bounds, for AddressSanitizer
  size_t scheduler_stack_size = 0;
};
inline Block* current_block = nullptr;

// The thread's index in its block, x fastest: warps are 32 consecutive ones.
inline unsigned linear_thread() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }

// The fibers' stacks, reused by every block (only touched pages cost memory), each with its ThreadSanitizer thread.
struct Stack {
  std::unique_ptr<unsigned char[]> memory = std::make_unique<unsigned char[]>(kStackBytes);
  void* tsan_thread = tsan::create_thread();
};
inline std::vector<Stack>& stacks() {
  static std::vector<Stack> s;
  return s;
}

#if defined(__x86_64__)
extern "C" void uoe_emu_switch(void** save, void* to);
#endif

// Prepares `c` to start `entry` (which never returns) on the given stack.
inline void start_context(Context& c, unsigned char* stack, size_t bytes, void (*entry)()) {
#if UOE_EMU_ASAN
  // The fiber that last used the stack ended without returning: its frames' redzones are still poisoned.
  __asan_unpoison_memory_region(stack, bytes);
#endif
#if defined(__x86_64__)
  auto** sp = reinterpret_cast<void**>((reinterpret_cast<uintptr_t>(stack) + bytes) & ~uintptr_t(15));
  *--sp = nullptr;                             // entry's return address: it never returns
  *--sp = reinterpret_cast<void*>(entry);      // where uoe_emu_switch's ret goes (entry then sees a call's alignment)
  for (int r = 0; r < 6; ++r) *--sp = nullptr;  // the callee-saved registers it pops first
  c.sp = sp;
#else
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = bytes;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
#endif
}

UOE_EMU_UNINSTRUMENTED inline void switch_context(Context& from, Context& to) {
#if defined(__x86_64__)
  uoe_emu_switch(&from.sp, to.sp);
#else
  swapcontext(&from.uc, &to.uc);
#endif
}


// The calling fiber waits until every fiber of `b` has arrived.
inline void arrive_and_wait(Barrier& b) {
  Block& blk = *current_block;
  Fiber& me = *blk.current;
  const char* token = nullptr;
  bool last = false;
  {
    tsan::Ignore bookkeeping;  // ended before the switch: a fiber left waiting by a deadlock must not stay ignored
    token = &b.tokens[b.generation % 2];
    tsan::release(token);
    last = ++b.arrived == b.expected;
    if (last) b.arrived = 0, ++b.generation;
    else me.waiting = &b, me.waiting_generation = b.generation;
  }
  if (!last) {
    me.asan.start(blk.scheduler_stack, blk.scheduler_stack_size, false);
    tsan::switch_to(blk.scheduler_tsan_thread);
    switch_context(me.context, blk.scheduler);
    me.asan.finish(&blk.scheduler_stack, &blk.scheduler_stack_size);
  }
  tsan::acquire(token);
}

// The per-thread object of type T of the running GPU thread (value-initialised at the start of each block), for state
// a stand-in header keeps per thread (as a register or local memory would).
template <class T>
T& thread_local_state() {
  static const size_t slot = [] {
    static size_t next = 0;
    return next++;
  }();
  auto& locals = current_block->current->locals;
  if (locals.size() <= slot) locals.resize(slot + 1);
  if (!locals[slot]) locals[slot] = std::make_shared<T>();
  return *static_cast<T*>(locals[slot].get());
}

template <class F>
struct FiberStart {
  static inline F* body = nullptr;
  UOE_EMU_UNINSTRUMENTED static void run() {
    current_block->current->asan.finish(&current_block->scheduler_stack, &current_block->scheduler_stack_size);
    tsan::acquire(current_block->launched);
    (*body)();
    Block& blk = *current_block;
    tsan::release(blk.finished);
    blk.current->done = true;  // (no Ignore here: it would outlive the fiber, whose ThreadSanitizer thread is reused)
    blk.current->asan.start(blk.scheduler_stack, blk.scheduler_stack_size, true);
    tsan::switch_to(blk.scheduler_tsan_thread);
    switch_context(blk.current->context, blk.scheduler);
  }
};

// Runs every thread of the block to its end; false (with a fault) on a deadlock.
inline bool run_fibers(Block& blk, unsigned block_index) {
  const unsigned n = unsigned(blk.fibers.size());
  for (unsigned pass = 0;; ++pass) {
    bool ran = false, all_done = true;
    for (unsigned i = 0; i < n; ++i) {
      Fiber& f = blk.fibers[pass % 2 == 0 ? i : n - 1 - i];
      if (f.done) continue;
      all_done = false;
      if (f.waiting && f.waiting->generation == f.waiting_generation) continue;
      f.waiting = nullptr;
      blk.current = &f;
      threadIdx = f.thread;
      const Stack& stack = stacks()[size_t(&f - blk.fibers.data())];
      AsanSwitch asan;
      asan.start(stack.memory.get(), kStackBytes, false);
      tsan::switch_to(stack.tsan_thread);
      switch_context(blk.scheduler, f.context);
      asan.finish();
      ran = true;
    }
    if (all_done) return true;
    if (!ran) {
      fault("deadlock in block " + std::to_string(block_index) +
            ": threads wait at a barrier (__syncthreads or a warp-collective step) that others never reach");
      return false;
    }
  }
}

// Whether blocks run last to first: UOE_EMU_BLOCKS=reversed at start-up (the stand-in's own test sets it too).
inline bool& blocks_reversed() {
  static bool reversed = [] {
    const char* v = std::getenv("UOE_EMU_BLOCKS");
    return v && std::strcmp(v, "reversed") == 0;
  }();
  return reversed;
}

// Runs f() on every thread of a grid of blocks of `block` threads (at most 1024), each thread with its threadIdx,
// blockIdx, blockDim and gridDim set, each block with smem_bytes of dynamic shared memory; returns when every block
// is done.
template <class F>
void launch(dim3 grid, dim3 block, F&& f, size_t smem_bytes = 0) {
  const unsigned size = block.x * block.y * block.z;
  if (size == 0 || size > kMaxThreads) return fault("a block of " + std::to_string(size) + " threads");
  while (stacks().size() < size) stacks().emplace_back();
  using Body = std::remove_reference_t<F>;
  const char launched = 0, finished = 0;  // ThreadSanitizer's tokens
  {
    tsan::Ignore bookkeeping;
    FiberStart<Body>::body = &f;
    const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
    for (uint64_t k = 0; k < blocks; ++k) {
      const uint64_t b = blocks_reversed() ? blocks - 1 - k : k;
      Block blk(size, smem_bytes);
      current_block = &blk;
      blk.scheduler_tsan_thread = tsan::current_thread(), blk.launched = &launched, blk.finished = &finished;
      blockIdx = {unsigned(b % grid.x), unsigned(b / grid.x % grid.y), unsigned(b / (uint64_t(grid.x) * grid.y))};
      blockDim = {block.x, block.y, block.z}, gridDim = {grid.x, grid.y, grid.z};
      for (unsigned t = 0; t < size; ++t) {
        Fiber& fib = blk.fibers[t];
        fib.thread = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
        start_context(fib.context, stacks()[t].memory.get(), kStackBytes, &FiberStart<Body>::run);
      }
      tsan::release(&launched);
      const bool ran = run_fibers(blk, unsigned(b));
      tsan::acquire(&finished);
      current_block = nullptr;
      if (!ran) return;
      if (!blk.guard_intact())
        fault("block " + std::to_string(b) + " wrote past its " + std::to_string(smem_bytes) +
              " bytes of dynamic shared memory");
    }
  }
}

// A warp-collective step: every lane of the calling thread's warp publishes `mine` and receives all 32 lanes' values
// (lane order). Every lane of the warp must call it, as with a full-mask shuffle. One barrier per step: steps
// alternate between two sets of slots, and a lane can only write a set again after every lane has passed the barrier
// of the step between, that is, has read the set.
template <class T>
std::array<T, 32> warp_exchange(const T& mine) {
  static_assert(sizeof(T) <= kSlotBytes && std::is_trivially_copyable_v<T>);
  Block& blk = *current_block;
  const unsigned t = linear_thread(), first = t / 32 * 32, set = blk.current->warp_steps++ % 2;
  auto& slots = blk.slots[set];
  std::memcpy(slots[t].data(), &mine, sizeof(T));
  arrive_and_wait(blk.warps[t / 32]);
  std::array<T, 32> all{};
  for (unsigned l = 0; l < 32 && first + l < blk.fibers.size(); ++l) std::memcpy(&all[l], slots[first + l].data(), sizeof(T));
  return all;
}

}  // namespace uoe::cuda_emu
