// A one-process communicator that forwards every collective to a LocalCommunicator: tests derive from it and
// override the one collective they watch or alter.
#pragma once
#include <memory>
#include <vector>

#include "core/communicator.h"

namespace uoe::test {

class ForwardingCommunicator : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  void all_reduce(const Tensor& t, ReduceOp op) override { local_.all_reduce(t, op); }
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    return local_.all_reduce_async(t, op);
  }
  void reduce_scatter(const Tensor& in, const Tensor& out, ReduceOp op) override { local_.reduce_scatter(in, out, op); }
  void all_gather(const Tensor& in, const Tensor& out, const std::vector<int64_t>& rows) override {
    local_.all_gather(in, out, rows);
  }
  void all_to_all(const Tensor& in, const std::vector<int64_t>& send, const Tensor& out,
                  const std::vector<int64_t>& recv) override {
    local_.all_to_all(in, send, out, recv);
  }
  void broadcast(const Tensor& t, int root) override { local_.broadcast(t, root); }
  void barrier() override {}
  std::unique_ptr<Communicator> split(int color, int key) override { return local_.split(color, key); }

 protected:
  void abort_all(int) override {}

 private:
  LocalCommunicator local_;
};

}  // namespace uoe::test
