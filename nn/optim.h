// Optimisers (AdamW with decoupled weight decay, SGD with momentum), the warmup + cosine schedule, global-norm clipping.
#pragma once
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/deferred_tensor.h"
#include "nn/module.h"

namespace uoe::nn {

// Parameters that get weight decay by default: matrices, except embeddings (norm weights
// and biases are vectors).
bool decays_by_default(const std::string& name, const Tensor& p);

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  // Applies one update from the parameters' .grad at learning rate lr (no-op for a parameter without grad).
  virtual void step(double lr) = 0;
  // Optimiser state by "<param name>.<slot>" (float32, also for bfloat16 parameters), plus "step" as a 0-d
  // int64 tensor.
  virtual NamedTensors state() const = 0;
  // state() as a checkpoint writes it, one tensor at a time: a sharded optimiser gathers each entry only when it
  // is produced (collective, in the same order on every rank).
  virtual DeferredTensors checkpoint_state() const { return defer(state()); }
  virtual void load_state(const std::map<std::string, Tensor>& state) = 0;
  int64_t steps() const { return steps_; }

 protected:
  int64_t steps_ = 0;
};

struct AdamWOptions {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0.1;
};

class AdamW : public Optimizer {
 public:
  AdamW(const NamedTensors& params, AdamWOptions opt);
  void step(double lr) override;
  NamedTensors state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;

 private:
  struct Slot { std::string name; Tensor param, m, v; bool decay; };
  std::vector<Slot> slots_;
  AdamWOptions opt_;
};

class SGD : public Optimizer {
 public:
  SGD(const NamedTensors& params, double momentum, double weight_decay);
  void step(double lr) override;
  NamedTensors state() const override;
  void load_state(const std::map<std::string, Tensor>& state) override;

 private:
  struct Slot { std::string name; Tensor param, velocity; bool decay; };
  std::vector<Slot> slots_;
  double momentum_, weight_decay_;
};

// Linear warmup from 0 to max_lr over `warmup` steps, then cosine decay to min_lr at `total`.
double warmup_cosine_lr(int64_t step, int64_t warmup, int64_t total, double max_lr, double min_lr);

// Scales every .grad so that the global L2 norm is at most max_norm (when max_norm > 0);
// returns the norm before clipping. The sum of squares runs in a fixed order. A non-finite norm (an inf or NaN
// gradient) leaves the gradients as they are, and the caller should skip the step (nn::train stops there).
// With expert parallelism, `sharded` are the parameters each rank of `group` holds a different part of (expert
// slices): their squares are summed over the group; `params` are the same on every rank and counted once.
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, const std::vector<Tensor>& sharded = {},
                      Communicator* group = nullptr);
// The L2 norm of `tensors` (undefined ones skipped) and, summed over `group`, of `sharded`, in float64 and a fixed
// order: what clip_grad_norm computes of the gradients (nn::train also checks the weights with it before a save).
double global_norm(const std::vector<Tensor>& tensors, const std::vector<Tensor>& sharded = {},
                   Communicator* group = nullptr);

}  // namespace uoe::nn
