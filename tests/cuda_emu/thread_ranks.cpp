// run_ranks: threads as ranks. Each collective publishes a pointer per rank, meets the others at a barrier, reads
// what it needs of theirs, and meets them again before anything it read may change.
#include "thread_ranks.h"

#include <omp.h>

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <tuple>
#include <vector>

#include "core/collective_checks.h"
#include "cuda/cuda_api.h"

namespace uoe::test {
namespace {

using collective::where;

// What the threads of a group share: a barrier, and a slot per rank for what each publishes.
class Group {
 public:
  explicit Group(int n) : size_(n), slots_(size_t(n)) {}
  int size() const { return size_; }

  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t generation = generation_;
    if (++arrived_ == size_) {
      arrived_ = 0, ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != generation || broken_; });
    if (generation_ == generation) fail("[thread ranks] another rank failed: this one stops waiting for it");
  }
  // Every rank's `mine`, once each has published it; valid until the collective's closing arrive_and_wait().
  std::vector<const void*> exchange(int rank, const void* mine) {
    slots_[size_t(rank)] = mine;
    arrive_and_wait();
    return slots_;
  }
  void break_off() {
    std::lock_guard<std::mutex> lock(mu_);
    broken_ = true;
    cv_.notify_all();
  }

 private:
  int size_;
  std::vector<const void*> slots_;
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
};

class DoneWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// The element-wise reduction of `parts` in float64 (floating dtypes) or int64, in rank order.
Tensor reduce(const Communicator& c, const char* name, const std::vector<Tensor>& parts, ReduceOp op) {
  const DType dtype = parts[0].dtype();
  UOE_CHECK(dtype != DType::Bool, where(c, name), "reductions take floating-point or integer tensors, got bool");
  const bool floating = is_floating(dtype);
  Tensor acc = parts[0].to(floating ? DType::Float64 : DType::Int64).contiguous().clone();
  for (size_t r = 1; r < parts.size(); ++r) {
    UOE_CHECK(parts[r].dtype() == dtype && parts[r].shape() == parts[0].shape(), where(c, name), "rank ", r, "'s ",
              dtype_name(parts[r].dtype()), " tensor of ", parts[r].numel(), " elements differs from rank 0's ",
              dtype_name(dtype), " tensor of ", parts[0].numel());
    const Tensor x = parts[r].to(acc.dtype()).contiguous();
    const auto combine = [&](auto* a, const auto* b) {
      for (int64_t i = 0; i < acc.numel(); ++i) a[i] = op == ReduceOp::Sum ? a[i] + b[i] : std::max(a[i], b[i]);
    };
    if (floating)
      combine(static_cast<double*>(acc.raw_data()), static_cast<const double*>(x.raw_data()));
    else
      combine(static_cast<int64_t*>(acc.raw_data()), static_cast<const int64_t*>(x.raw_data()));
  }
  return acc.to(dtype);
}

class ThreadCommunicator final : public Communicator {
 public:
  ThreadCommunicator(std::shared_ptr<Group> group, int rank) : group_(std::move(group)), rank_(rank) {}
  int rank() const override { return rank_; }
  int size() const override { return group_->size(); }
  int local_rank() const override { return rank_; }

  void all_reduce(const Tensor& t, ReduceOp op) override {
    check_cpu("all_reduce", t);
    const std::vector<const void*> all = group_->exchange(rank_, &t);
    std::vector<Tensor> parts;
    for (const void* p : all) parts.push_back(*static_cast<const Tensor*>(p));
    const Tensor result = reduce(*this, "all_reduce", parts, op);
    group_->arrive_and_wait();
    Tensor(t).copy_(result);
  }
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    all_reduce(t, op);
    return std::make_unique<DoneWork>();
  }
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    collective::check_reduce_scatter(*this, input, output);
    check_cpu("reduce_scatter", input);
    const int64_t n = output.size(0);
    const std::vector<const void*> all = group_->exchange(rank_, &input);
    std::vector<Tensor> parts;
    for (const void* p : all) parts.push_back(static_cast<const Tensor*>(p)->narrow(0, rank_ * n, n));
    const Tensor result = reduce(*this, "reduce_scatter", parts, op);
    group_->arrive_and_wait();
    Tensor(output).copy_(result);
  }
  // Rank j's input is read while rank j writes the other ranks' blocks of its output: an in-place input is safe.
  void all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows) override {
    const std::vector<int64_t> r = collective::gather_rows(*this, input, output, rows);
    check_cpu("all_gather", input);
    const std::vector<int64_t> at = collective::row_offsets(r);
    const std::vector<const void*> all = group_->exchange(rank_, &input);
    for (size_t j = 0; j < all.size(); ++j) {
      Tensor block = output.narrow(0, at[j], r[j]);
      if (block.raw_data() != input.raw_data() || int(j) != rank_) block.copy_(*static_cast<const Tensor*>(all[j]));
    }
    group_->arrive_and_wait();
  }
  void all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                  const std::vector<int64_t>& recv_rows) override {
    collective::check_all_to_all(*this, input, send_rows, output, recv_rows);
    check_cpu("all_to_all", input);
    const auto mine = std::make_tuple(&input, &send_rows);
    const std::vector<const void*> all = group_->exchange(rank_, &mine);
    const std::vector<int64_t> recv_at = collective::row_offsets(recv_rows);
    for (size_t j = 0; j < all.size(); ++j) {
      const auto& [in, sends] = *static_cast<const decltype(mine)*>(all[j]);
      const int64_t from = collective::row_offsets(*sends)[size_t(rank_)];
      output.narrow(0, recv_at[j], recv_rows[j]).copy_(in->narrow(0, from, recv_rows[j]));
    }
    group_->arrive_and_wait();
  }
  void broadcast(const Tensor& t, int root) override {
    collective::check_tensor(*this, "broadcast", t);
    collective::check_root(*this, "broadcast", root);
    check_cpu("broadcast", t);
    const std::vector<const void*> all = group_->exchange(rank_, &t);
    if (rank_ != root) Tensor(t).copy_(*static_cast<const Tensor*>(all[size_t(root)]));
    group_->arrive_and_wait();
  }
  void barrier() override { group_->arrive_and_wait(); }

  // The first rank of each new group (by key, then rank) makes the group's state; the others take it from it.
  std::unique_ptr<Communicator> split(int color, int key) override {
    UOE_CHECK(color >= 0, where(*this, "split"), "color must be >= 0, got ", color);
    struct Entry {
      int color, key, rank;
      std::shared_ptr<Group> made;
    } mine{color, key, rank_, nullptr};
    const std::vector<const void*> all = group_->exchange(rank_, &mine);
    std::vector<const Entry*> members;
    for (const void* p : all)
      if (static_cast<const Entry*>(p)->color == color) members.push_back(static_cast<const Entry*>(p));
    std::sort(members.begin(), members.end(),
              [](const Entry* a, const Entry* b) { return std::tie(a->key, a->rank) < std::tie(b->key, b->rank); });
    const int new_rank = int(std::find(members.begin(), members.end(), &mine) - members.begin());
    if (new_rank == 0) mine.made = std::make_shared<Group>(int(members.size()));
    group_->arrive_and_wait();
    std::shared_ptr<Group> group = members[0]->made;
    group_->arrive_and_wait();
    return std::make_unique<ThreadCommunicator>(std::move(group), new_rank);
  }

 protected:
  void abort_all(int) override {}  // the process ends right after, and every rank with it

 private:
  void check_cpu(const char* name, const Tensor& t) const {
    collective::check_tensor(*this, name, t);
    UOE_CHECK(t.is_cpu(), where(*this, name), "thread ranks exchange CPU tensors, got one on ", t.device().str());
  }

  std::shared_ptr<Group> group_;
  int rank_;
};

}  // namespace

void run_ranks(int n, const std::function<void(Communicator& comm)>& body) {
  const auto group = std::make_shared<Group>(n);
  std::vector<std::exception_ptr> errors(static_cast<size_t>(n));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r)
    threads.emplace_back([&, r] {
      omp_set_num_threads(1);
      try {
        cuda::set_device(r);
        const std::unique_ptr<Communicator> comm = route_by_device(std::make_unique<ThreadCommunicator>(group, r));
        body(*comm);
      } catch (...) {
        errors[size_t(r)] = std::current_exception();
        group->break_off();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& e : errors)
    if (e) std::rethrow_exception(e);
}

}  // namespace uoe::test
