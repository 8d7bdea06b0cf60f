// ZeRO-1: row shards of every parameter, an inner optimiser over this rank's shards, all-gathers after each step,
// and the state gathered to (or cut from) its full, unsharded form.
#include "nn/zero_optimizer.h"

#include "core/collective_checks.h"
#include "core/error.h"
#include "nn/data_parallel.h"

namespace uoe::nn {
namespace {

// t (contiguous) as rows: [numel / last dim, last dim] for a matrix or higher, [numel] otherwise; shares storage.
Tensor as_rows(const Tensor& t) {
  if (t.dim() >= 2) {
    const int64_t cols = t.size(-1);
    return alias_with(t, {t.numel() / cols, cols}, {cols, 1}, t.offset());
  }
  return alias_with(t, {t.numel()}, {1}, t.offset());
}

}  // namespace

ZeroOptimizer::ZeroOptimizer(const NamedTensors& params, Communicator& comm, const Factory& make_inner)
    : ZeroOptimizer(params, [&comm](const std::string&) -> Communicator& { return comm; }, make_inner) {}

ZeroOptimizer::ZeroOptimizer(const NamedTensors& params, const GroupOf& group_of, const Factory& make_inner) {
  NamedTensors mine;
  for (const auto& [name, p] : params) {
    Communicator& comm = group_of(name);
    UOE_CHECK(p.is_contiguous(), collective::where(comm, "zero"), "parameter '", name, "' must be contiguous");
    Shard s{name, &comm, p, as_rows(p), {}, 0, {}};
    for (int r = 0; r < comm.size(); ++r) s.counts.push_back(rank_rows(s.rows.size(0), r, comm.size()).count);
    const RowRange own = rank_rows(s.rows.size(0), comm.rank(), comm.size());
    s.begin = own.begin;
    s.mine = s.rows.narrow(0, own.begin, own.count);
    if (own.count > 0) mine.emplace_back(name, s.mine);
    shards_.push_back(std::move(s));
  }
  inner_ = make_inner(mine);
  // The per-parameter state names, read from the same optimiser over one scalar parameter "p".
  for (const auto& [key, t] : make_inner({{"p", zeros({1})}})->state())
    if (key.rfind("p.", 0) == 0) slots_.push_back(key.substr(2));
}

void ZeroOptimizer::step(double lr) {
  for (Shard& s : shards_) {
    const Tensor g = s.param.grad();
    s.mine.set_grad(g.defined() ? as_rows(g.contiguous()).narrow(0, s.begin, s.mine.size(0)) : Tensor());
  }
  inner_->step(lr);
  steps_ = inner_->steps();
  for (Shard& s : shards_) s.comm->all_gather(s.mine, s.rows, s.counts);
}

NamedTensors ZeroOptimizer::state() const { return materialize(checkpoint_state()); }

DeferredTensors ZeroOptimizer::checkpoint_state() const {
  const NamedTensors parts = inner_->state();
  const std::map<std::string, Tensor> by_name(parts.begin(), parts.end());
  DeferredTensors out;
  for (const Shard& s : shards_) {
    // optimiser state is float32 whatever the parameter's dtype (nn/optim.h)
    const TensorOptions like = TensorOptions{}.with_dtype(DType::Float32).with_device(s.param.device());
    for (const std::string& slot : slots_) {
      const std::string key = s.name + "." + slot;
      Shape empty_rows = s.rows.shape();
      empty_rows[0] = 0;
      const Tensor part = s.mine.size(0) > 0 ? by_name.at(key) : empty(empty_rows, like);
      out.push_back({key, DType::Float32, s.param.shape(),
                     [part, like, comm = s.comm, rows = s.rows.shape(), counts = s.counts, shape = s.param.shape()] {
                       const Tensor full = empty(rows, like);
                       comm->all_gather(part, full, counts);
                       return full.view(shape);
                     }});
    }
  }
  const Tensor step = by_name.at("step");
  out.push_back({"step", step.dtype(), step.shape(), [step] { return step; }});
  return out;
}

void ZeroOptimizer::load_state(const std::map<std::string, Tensor>& state) {
  std::map<std::string, Tensor> own;
  for (const Shard& s : shards_) {
    if (s.mine.size(0) == 0) continue;
    for (const std::string& slot : slots_) {
      const std::string key = s.name + "." + slot;
      auto it = state.find(key);
      UOE_CHECK(it != state.end(), "[optimizer] state is missing '", key, "'");
      UOE_CHECK(it->second.shape() == s.param.shape(), "[optimizer] state '", key, "' has shape ",
                shape_str(it->second.shape()), " but the parameter is ", shape_str(s.param.shape()));
      own[key] = as_rows(it->second.contiguous()).narrow(0, s.begin, s.mine.size(0));
    }
  }
  auto step = state.find("step");
  UOE_CHECK(step != state.end(), "[optimizer] state is missing 'step'");
  own["step"] = step->second;
  inner_->load_state(own);
  steps_ = inner_->steps();
}

}  // namespace uoe::nn
