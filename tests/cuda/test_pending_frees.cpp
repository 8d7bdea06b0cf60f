// The caching allocator's bookkeeping of blocks freed while other streams may still use them
// (cuda/pending_frees.h), with fake events: no GPU needed, so it runs in every build.
#include <gtest/gtest.h>

#include <memory>
#include <vector>

#include "cuda/pending_frees.h"

namespace uoe::cuda {
namespace {

// Stands for an event on one stream: done once that stream's work has "completed".
struct FakeMarker {
  std::shared_ptr<bool> completed;
  int* waits;
  bool done() const { return *completed; }
  void wait() const {
    ++*waits;
    *completed = true;
  }
};

struct FakeStreams {
  std::vector<std::shared_ptr<bool>> state;
  int waits = 0;
  explicit FakeStreams(int n) {
    for (int i = 0; i < n; ++i) state.push_back(std::make_shared<bool>(false));
  }
  FakeMarker marker(int stream) { return {state[size_t(stream)], &waits}; }
  void complete(int stream) { *state[size_t(stream)] = true; }
};

struct Block {
  int id;
};

std::vector<int> released_by(PendingFrees<Block, FakeMarker>& p, bool all) {
  std::vector<int> ids;
  const auto release = [&](Block* b) { ids.push_back(b->id); };
  if (all)
    p.release_all(release);
  else
    p.release_completed(release);
  return ids;
}

TEST(PendingFrees, ABlockReturnsOnlyOnceEveryStreamThatUsedItIsDone) {
  FakeStreams streams(3);
  PendingFrees<Block, FakeMarker> pending;
  Block a{1}, b{2}, c{3};
  pending.add(&a, {streams.marker(0), streams.marker(1)});
  pending.add(&b, {streams.marker(1)});
  pending.add(&c, {streams.marker(2)});
  EXPECT_TRUE(released_by(pending, false).empty());
  streams.complete(0);  // a still waits for stream 1
  EXPECT_TRUE(released_by(pending, false).empty());
  streams.complete(1);
  EXPECT_EQ(released_by(pending, false), (std::vector<int>{1, 2}));
  EXPECT_EQ(pending.size(), 1u);
  EXPECT_TRUE(released_by(pending, false).empty());  // released once, not again
  EXPECT_EQ(streams.waits, 0);                        // polling never blocks
  streams.complete(2);
  EXPECT_EQ(released_by(pending, false), (std::vector<int>{3}));
  EXPECT_EQ(pending.size(), 0u);
}

TEST(PendingFrees, ReleaseAllWaitsForEveryOutstandingMarker) {
  FakeStreams streams(2);
  PendingFrees<Block, FakeMarker> pending;
  Block a{1}, b{2};
  pending.add(&a, {streams.marker(0), streams.marker(1)});
  pending.add(&b, {streams.marker(1)});
  streams.complete(0);
  EXPECT_TRUE(released_by(pending, false).empty());  // drops a's completed marker, keeps both blocks
  EXPECT_EQ(released_by(pending, true), (std::vector<int>{1, 2}));
  EXPECT_EQ(streams.waits, 2);  // stream 1's marker of a and of b; a's stream-0 marker was already dropped
  EXPECT_EQ(pending.size(), 0u);
}

}  // namespace
}  // namespace uoe::cuda
