// Blocks freed while streams other than their allocation stream may still use them (record_stream, as PyTorch's):
// each waits for the markers recorded on those streams at its free before it goes back to its pool.
//
// Pure bookkeeping, no CUDA calls: Marker is any type with `bool done()` (the marked work has completed; never
// blocks) and `void wait()` (blocks until it has). The caching allocator uses CUDA events; tests use fakes.
// Not thread-safe: the allocator calls it under its own lock.
#pragma once
#include <cstddef>
#include <utility>
#include <vector>

namespace uoe::cuda {

template <typename Block, typename Marker>
class PendingFrees {
 public:
  // `block` may be handed out again once every marker is done.
  void add(Block* block, std::vector<Marker> markers) { pending_.push_back({block, std::move(markers)}); }

  // Calls release(block) for every block whose markers have all completed, in the order they were freed, and
  // forgets them; the others stay. Completed markers are dropped so that they are not asked again.
  template <typename Release>
  void release_completed(Release&& release) {
    size_t kept = 0;
    for (size_t i = 0; i < pending_.size(); ++i) {
      Entry& e = pending_[i];
      std::erase_if(e.markers, [](Marker& m) { return m.done(); });
      if (e.markers.empty()) {
        release(e.block);
        continue;
      }
      if (kept != i) pending_[kept] = std::move(e);  // (moved onto itself, it would lose its markers)
      ++kept;
    }
    pending_.resize(kept);
  }

  // Waits for every marker, then releases every block (before the cache is emptied, or a failed allocation is
  // retried).
  template <typename Release>
  void release_all(Release&& release) {
    for (Entry& e : pending_)
      for (Marker& m : e.markers) m.wait();
    for (Entry& e : pending_) release(e.block);
    pending_.clear();
  }

  size_t size() const { return pending_.size(); }

 private:
  struct Entry {
    Block* block;
    std::vector<Marker> markers;
  };
  std::vector<Entry> pending_;
};

}  // namespace uoe::cuda
