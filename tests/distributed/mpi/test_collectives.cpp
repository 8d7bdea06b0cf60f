// Collectives of world() across the ranks of mpirun: values, uneven splits, in-place gathers, async all-reduce,
// and errors that name the op and the rank.
#include <gtest/gtest.h>

#include "core/communicator.h"
#include "core/error.h"

namespace uoe {
namespace {

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

TEST(Collectives, AllReduceSumAndMax) {
  Communicator& c = world();
  const int r = c.rank(), n = c.size();
  const Tensor f = from_vector<float>({float(r), 1.0f, float(10 * r)}, {3});
  c.all_reduce(f);
  EXPECT_EQ(floats(f), (std::vector<float>{float(n * (n - 1) / 2), float(n), float(10 * n * (n - 1) / 2)}));
  const Tensor i = from_vector<int64_t>({int64_t(r), -int64_t(r)}, {2});
  c.all_reduce(i, ReduceOp::Max);
  EXPECT_EQ(i.to_vector<int64_t>(), (std::vector<int64_t>{n - 1, 0}));
  const Tensor d = from_vector<double>({0.5 * r}, {1});
  c.all_reduce(d);
  EXPECT_DOUBLE_EQ(d.item<double>(), 0.25 * n * (n - 1));
}

TEST(Collectives, AsyncAllReducesCompleteInOrder) {
  Communicator& c = world();
  const Tensor a = full({1000}, double(c.rank() + 1)), b = full({7}, 2.0);
  std::unique_ptr<Work> wa = c.all_reduce_async(a), wb = c.all_reduce_async(b);
  while (!wa->test()) {
  }
  wa->wait();
  wb->wait();
  EXPECT_TRUE(wb->test());
  const float sum = float(c.size() * (c.size() + 1) / 2);
  for (float v : floats(a)) ASSERT_EQ(v, sum);
  for (float v : floats(b)) ASSERT_EQ(v, 2.0f * float(c.size()));
}

TEST(Collectives, ReduceScatterGivesEachRankItsRows) {
  Communicator& c = world();
  const int n = c.size();
  // input [n * 2, 3]: element e of every rank is e + rank
  const Tensor in = arange(0, double(n * 6)).reshape({n * 2, 3}) + double(c.rank());
  const Tensor out = zeros({2, 3});
  c.reduce_scatter(in, out);
  std::vector<float> want;
  for (int e = c.rank() * 6; e < (c.rank() + 1) * 6; ++e) want.push_back(float(n * e + n * (n - 1) / 2));
  EXPECT_EQ(floats(out), want);
}

TEST(Collectives, AllGatherEvenUnevenAndInPlace) {
  Communicator& c = world();
  const int r = c.rank(), n = c.size();
  const Tensor even = zeros({2 * n, 2});
  c.all_gather(full({2, 2}, double(r)), even);
  for (int j = 0; j < n; ++j) EXPECT_EQ(floats(even.narrow(0, 2 * j, 2)), std::vector<float>(4, float(j)));

  // rank j contributes j + 1 rows of value j; gathered in place (the input is this rank's rows of the output)
  std::vector<int64_t> rows;
  for (int j = 0; j < n; ++j) rows.push_back(j + 1);
  const int64_t total = int64_t(n) * (n + 1) / 2, mine = int64_t(r) * (r + 1) / 2;
  const Tensor out = zeros({total, 3}, TensorOptions{}.with_dtype(DType::Int32));
  out.narrow(0, mine, r + 1).fill_(double(r));
  c.all_gather(out.narrow(0, mine, r + 1), out, rows);
  std::vector<int32_t> want;
  for (int j = 0; j < n; ++j) want.insert(want.end(), size_t(3 * (j + 1)), j);
  EXPECT_EQ(out.to_vector<int32_t>(), want);
}

TEST(Collectives, AllToAllWithUnevenSplits) {
  Communicator& c = world();
  const int r = c.rank(), n = c.size();
  // rank r sends (r + 1) * (j + 1) rows to rank j, each row [r, j]
  std::vector<int64_t> send, recv;
  std::vector<int64_t> values;
  for (int j = 0; j < n; ++j) {
    send.push_back(int64_t(r + 1) * (j + 1));
    recv.push_back(int64_t(j + 1) * (r + 1));
    for (int64_t k = 0; k < send.back(); ++k) values.insert(values.end(), {r, j});
  }
  const Tensor in = from_vector<int64_t>(values, {int64_t(values.size() / 2), 2});
  int64_t recv_total = 0;
  for (int64_t v : recv) recv_total += v;
  const Tensor out = zeros({recv_total, 2}, TensorOptions{}.with_dtype(DType::Int64));
  c.all_to_all(in, send, out, recv);
  std::vector<int64_t> want;
  for (int j = 0; j < n; ++j)
    for (int64_t k = 0; k < recv[size_t(j)]; ++k) want.insert(want.end(), {j, r});
  EXPECT_EQ(out.to_vector<int64_t>(), want);
}

TEST(Collectives, BroadcastFromTheLastRankAndBarrier) {
  Communicator& c = world();
  const int root = c.size() - 1;
  const Tensor t = full({4}, double(c.rank() * 3 + 1), TensorOptions{}.with_dtype(DType::BFloat16));
  c.broadcast(t, root);
  EXPECT_EQ(floats(t.to(DType::Float32)), std::vector<float>(4, float(root * 3 + 1)));
  c.barrier();
}

TEST(Collectives, SplitMakesGroupsRankedByKey) {
  Communicator& c = world();
  const int r = c.rank(), n = c.size();
  // Every rank alone: a group of one whose all_reduce leaves the value as it is.
  const std::unique_ptr<Communicator> alone = c.split(r, 0);
  EXPECT_EQ(alone->size(), 1);
  EXPECT_EQ(alone->rank(), 0);
  const Tensor own = full({2}, double(r + 1));
  alone->all_reduce(own);
  EXPECT_EQ(floats(own), std::vector<float>(2, float(r + 1)));
  // Every rank together, ranked in reverse: the last world rank is rank 0 of the group.
  const std::unique_ptr<Communicator> reversed = c.split(0, n - r);
  EXPECT_EQ(reversed->size(), n);
  EXPECT_EQ(reversed->rank(), n - 1 - r);
  const Tensor sum = full({3}, double(r));
  reversed->all_reduce(sum);
  EXPECT_EQ(floats(sum), std::vector<float>(3, float(n * (n - 1) / 2)));
  const Tensor from_root = full({1}, double(r));
  reversed->broadcast(from_root, 0);
  EXPECT_EQ(floats(from_root), std::vector<float>{float(n - 1)});
  EXPECT_THROW(c.split(-1, 0), Error);  // on every rank alike: no rank is left waiting
}

TEST(Collectives, ErrorsNameTheOpAndTheRank) {
  Communicator& c = world();
  const std::string rank = "rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size());
  auto message = [](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  std::string m = message([&] { c.all_gather(zeros({1, 2}), zeros({5, 2}), std::vector<int64_t>(size_t(c.size()), 1)); });
  EXPECT_NE(m.find("[all_gather] " + rank), std::string::npos) << m;
  m = message([&] { c.all_reduce(zeros({2}, TensorOptions{}.with_dtype(DType::BFloat16))); });
  EXPECT_NE(m.find("[all_reduce] " + rank), std::string::npos) << m;
  EXPECT_NE(m.find("bfloat16"), std::string::npos) << m;
  m = message([&] { c.broadcast(zeros({2}), c.size()); });
  EXPECT_NE(m.find("[broadcast] " + rank + ": root"), std::string::npos) << m;
  m = message([&] { c.all_reduce(zeros({4, 4}).mT()); });
  EXPECT_NE(m.find("contiguous"), std::string::npos) << m;
  m = message([&] { c.all_to_all(zeros({3, 2}), {3}, zeros({3, 2}), {3}); });
  if (c.size() > 1) {
    EXPECT_NE(m.find("[all_to_all] " + rank + ": send_rows has 1 entries"), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace uoe
