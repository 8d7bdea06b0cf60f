// Node: one recorded op of the graph (its backward), saved tensors with version checks, and record().
#pragma once
#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "autograd/grad_mode.h"
#include "autograd/gradient_math.h"
#include "core/tensor.h"

namespace uoe::autograd {

// A tensor kept for backward, with the storage version it had when saved. Unpacking it
// after an in-place write raises an error naming the op.
struct SavedTensor {
  Tensor data;  // detached alias: no autograd history, so no reference cycles
  uint64_t version = 0;
};

// Every Node has one output (the tensor whose grad_fn it is) and one edge per input.
class Node : public std::enable_shared_from_this<Node> {
 public:
  // Releases the graph below iteratively: destroyed one stack frame per node, a chain of about 120,000 ops
  // overflowed an 8 MiB stack.
  virtual ~Node();
  virtual std::string name() const = 0;
  // grad: d loss / d output, shaped like the output. Returns d loss / d input for every
  // input, in order; an undefined Tensor means "no gradient".
  virtual std::vector<Tensor> apply(const Tensor& grad) = 0;
  // For a node of one input: adds what apply(grad) would return into `sum`, that input's running gradient sum
  // (defined, contiguous, its shape, and the engine's alone), in place and without a full-size temporary, and returns
  // true; false (the default) if it cannot, and the engine calls apply.
  virtual bool add_into(Tensor& sum, const Tensor& grad) {
    (void)sum, (void)grad;
    return false;
  }

  void save(std::initializer_list<Tensor> tensors);
  // The i-th saved tensor; raises if it was modified in place since it was saved.
  Tensor saved(size_t i) const;
  // Frees the saved tensors; a later backward through this node that needs them raises.
  void release_saved();

  std::vector<std::shared_ptr<Node>> next;  // per input; null when that input needs no grad
  std::vector<GradHook> pre_hooks;          // run on the incoming grad before apply
  Shape out_shape;
  DType out_dtype = DType::Float32;
  Device out_device;
  uint64_t seq = 0;  // creation order: later nodes run first

 private:
  std::vector<SavedTensor> saved_;
  bool released_ = false;
};

// Leaf node: the incoming gradient, after the leaf's hooks, goes into the leaf tensor's .grad.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(std::shared_ptr<TensorImpl> leaf) : leaf_(std::move(leaf)) {}
  std::string name() const override { return "AccumulateGrad"; }
  // Runs the leaf's hooks: the one result is the gradient for the leaf itself, which the engine then accumulates.
  std::vector<Tensor> apply(const Tensor& grad) override;
  // .grad := .grad + g, or a copy of g when it is the first, with the op layer's arithmetic.
  void accumulate(const Tensor& g, const GradientMath& math);

 private:
  std::shared_ptr<TensorImpl> leaf_;
};

// The node that receives gradients for `t`: its grad_fn, or its (shared) accumulator when a
// leaf that requires grad; null otherwise.
std::shared_ptr<Node> gradient_edge(const Tensor& t);

bool needs_grad(const std::vector<Tensor>& inputs);
void attach(const std::shared_ptr<Node>& node, Tensor& out, const std::vector<Tensor>& inputs);

// If grad mode is on and an input requires grad: creates an N node whose edges point at the
// inputs, makes it `out`'s grad_fn and returns it; otherwise returns null.
template <typename N, typename... Args>
std::shared_ptr<N> record(Tensor& out, std::initializer_list<Tensor> inputs, Args&&... args) {
  if (!grad_enabled() || !needs_grad(inputs)) return nullptr;
  auto node = std::make_shared<N>(std::forward<Args>(args)...);
  attach(node, out, inputs);
  return node;
}

}  // namespace uoe::autograd
