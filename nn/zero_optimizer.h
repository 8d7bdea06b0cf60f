// ZeRO stage 1: the optimiser state sharded across the ranks, each rank updating its share of every parameter.
#pragma once
#include <functional>
#include <memory>

#include "core/communicator.h"
#include "nn/optim.h"

namespace uoe::nn {

// Wraps an optimiser (AdamW, SGD, ...) so that each rank keeps the state of a 1/size share of the parameters.
//
// Every parameter is seen as rows (a matrix [numel / last dim, last dim]; a vector as itself) and cut into
// `size` contiguous row ranges (rank_rows). Rank r's inner optimiser holds only range r of each parameter, as a
// view that keeps the parameter's name and rank (so weight decay follows the same rule); step() updates those
// rows from the gradients, which must already be equal on every rank (averaged by DataParallel), then an
// all-gather per parameter gives every rank the whole updated parameter. The result equals the wrapped
// optimiser's step on every rank, with its state memory divided by the number of ranks.
//
// state() is collective (every rank must call it): it gathers the full, unsharded state under the inner
// optimiser's names and shapes ("<param>.exp_avg", ..., "step"); checkpoint_state() gathers each entry only when
// it is produced. load_state() takes such a full state and keeps
// this rank's rows, so state saved at N ranks loads at any M, with or without ZeRO.
//
// With expert parallelism a parameter may be shared by fewer ranks (an expert shard is held by one rank of each
// expert group): `group_of` names the communicator of the ranks that hold each parameter, across which it is
// sharded; state() and load_state() then handle this rank's whole parameters (the expert slices).
class ZeroOptimizer : public Optimizer {
 public:
  using Factory = std::function<std::unique_ptr<Optimizer>(const NamedTensors&)>;
  using GroupOf = std::function<Communicator&(const std::string& param_name)>;
  ZeroOptimizer(const NamedTensors& params, Communicator& comm, const Factory& make_inner);
  ZeroOptimizer(const NamedTensors& params, const GroupOf& group_of, const Factory& make_inner);
  void step(double lr) override;
  NamedTensors state() const override;
  DeferredTensors checkpoint_state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;

 private:
  struct Shard {
    std::string name;
    Communicator* comm;           // the ranks that share the parameter
    Tensor param;                 // the whole parameter
    Tensor rows;                  // the parameter as rows
    std::vector<int64_t> counts;  // rows of each rank
    int64_t begin = 0;            // this rank's first row
    Tensor mine;                  // this rank's rows of `rows` (what the inner optimiser updates)
  };
  std::vector<Shard> shards_;
  std::vector<std::string> slots_;  // the inner optimiser's per-parameter state names ("exp_avg", ...)
  std::unique_ptr<Optimizer> inner_;
};

}  // namespace uoe::nn
