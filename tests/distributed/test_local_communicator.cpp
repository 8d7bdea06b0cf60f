// The one-process communicator: collectives are copies with the same argument checks as MPI and NCCL, and a
// process started without a launcher is a world of one.
#include <gtest/gtest.h>

#include "core/communicator.h"
#include "core/error.h"

namespace uoe {
namespace {

TEST(LocalCommunicator, WorldOfAPlainProcessHasOneRank) {
  EXPECT_EQ(world().size(), 1);
  EXPECT_EQ(world().rank(), 0);
  EXPECT_EQ(world().local_rank(), 0);
}

TEST(LocalCommunicator, CollectivesCopyOrKeepTheirInput) {
  LocalCommunicator c;
  const Tensor t = from_vector<float>({1, 2, 3}, {3});
  c.all_reduce(t, ReduceOp::Max);
  c.all_reduce_async(t)->wait();
  c.broadcast(t, 0);
  c.barrier();
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3}));
  const Tensor out = zeros({3});
  const uint64_t version = out.version();
  c.reduce_scatter(t, out);
  EXPECT_EQ(out.to_vector<float>(), t.to_vector<float>());
  EXPECT_GT(out.version(), version);  // written in place, as autograd's saved-tensor check must see
  const Tensor gathered = zeros({3, 2});
  c.all_gather(full({3, 2}, 5.0), gathered, {3});
  EXPECT_EQ(gathered.to_vector<float>(), std::vector<float>(6, 5.0f));
  const Tensor moved = zeros({2, 2}, TensorOptions{}.with_dtype(DType::Int64));
  c.all_to_all(full({2, 2}, 7.0, TensorOptions{}.with_dtype(DType::Int64)), {2}, moved, {2});
  EXPECT_EQ(moved.to_vector<int64_t>(), std::vector<int64_t>(4, 7));
}

TEST(LocalCommunicator, BadArgumentsNameTheOpAndTheRank) {
  LocalCommunicator c;
  EXPECT_THROW(
      {
        try {
          c.all_gather(zeros({2, 3}), zeros({4, 3}));
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("[all_gather] rank 0 of 1: the input [2, 3] must have this rank's 4 rows"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(c.reduce_scatter(zeros({4}), zeros({2})), Error);
  EXPECT_THROW(c.all_to_all(zeros({3, 2}), {2}, zeros({3, 2}), {3}), Error);
  EXPECT_THROW(c.all_to_all(zeros({3, 2}), {3}, zeros({3, 3}), {3}), Error);
  EXPECT_THROW(
      {
        try {
          c.all_to_all(zeros({2, 2}), {2}, zeros({3, 2}), {3});
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("[all_to_all] rank 0 of 1: the input [2, 2] and the output [3, 2] of a "
                                               "one-rank collective must hold as many elements"),
                    std::string::npos)
              << e.what();
          throw;
        }
      },
      Error);
  EXPECT_THROW(c.all_gather(zeros({2}), zeros({2}, TensorOptions{}.with_dtype(DType::Float64))), Error);
  EXPECT_THROW(c.broadcast(zeros({2}), 1), Error);
  EXPECT_THROW(c.all_reduce(zeros({3, 3}).mT()), Error);
  EXPECT_THROW(c.all_gather(scalar_tensor(1.0), zeros({1})), Error);
}

TEST(LocalCommunicator, SplitGivesAGroupOfOne) {
  LocalCommunicator c;
  const std::unique_ptr<Communicator> group = c.split(3, 7);
  EXPECT_EQ(group->size(), 1);
  EXPECT_EQ(group->rank(), 0);
  EXPECT_THROW(c.split(-1, 0), Error);
}

TEST(LocalCommunicator, RunOrAbortPropagatesWithOneRank) {
  LocalCommunicator c;
  EXPECT_EQ(run_or_abort(c, "test", [] { return 7; }), 7);
  EXPECT_THROW(run_or_abort(c, "test", []() -> int { fail("boom"); }), Error);
}

}  // namespace
}  // namespace uoe
