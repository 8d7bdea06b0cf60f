// Node bookkeeping: saved-tensor version checks, graph edges, gradient accumulation into leaves.
#include "autograd/node.h"

#include <atomic>
#include <limits>

#include "core/error.h"

namespace uoe::autograd {
namespace {
std::atomic<uint64_t> g_seq{0};
}

Node::~Node() {
  // Nodes only this one keeps alive are moved here and released in a loop, their own edges taken first, so no
  // destructor recurses; shared ones just lose a reference. Edges are checked one at a time so that a node listed
  // twice (x + x) is taken at its last reference.
  std::vector<std::shared_ptr<Node>> orphans;
  auto take = [&orphans](std::vector<std::shared_ptr<Node>>& edges) {
    for (std::shared_ptr<Node>& e : edges) {
      if (e.use_count() == 1) orphans.push_back(std::move(e));
      else e.reset();
    }
  };
  take(next);
  while (!orphans.empty()) {
    std::shared_ptr<Node> n = std::move(orphans.back());
    orphans.pop_back();
    take(n->next);
  }
}

void Node::save(std::initializer_list<Tensor> tensors) {
  for (const Tensor& t : tensors) {
    if (!t.defined()) {
      saved_.push_back({});
      continue;
    }
    saved_.push_back({t.detach(), t.version()});
  }
}

Tensor Node::saved(size_t i) const {
  UOE_CHECK(!released_, "[backward] ", name(),
            ": trying to run backward through the graph a second time (its saved tensors are "
            "freed); pass retain_graph=true to the first backward");
  UOE_CHECK(i < saved_.size(), "[backward] ", name(), ": saved tensor ", i, " missing");
  const SavedTensor& s = saved_[i];
  if (!s.data.defined()) return {};
  UOE_CHECK(s.data.version() == s.version, "[backward] ", name(),
            ": a tensor of shape ", shape_str(s.data.shape()),
            " that this op saved for backward was modified by an in-place operation (version ",
            s.data.version(), ", expected ", s.version,
            "); clone it before modifying it, or modify it outside the graph");
  return s.data;
}

void Node::release_saved() {
  if (saved_.empty()) return;
  saved_.clear();
  released_ = true;
}

std::vector<Tensor> AccumulateGrad::apply(const Tensor& grad) {
  Tensor g = grad;
  for (const GradHook& hook : leaf_->autograd.leaf_hooks) {
    Tensor r = hook(g);
    if (r.defined()) g = r;
  }
  return {g};
}

void AccumulateGrad::accumulate(const Tensor& g, const GradientMath& math) {
  Tensor leaf(leaf_);
  const Tensor old = leaf.grad();
  leaf.set_grad(old.defined() ? math.add(old, g) : math.clone(g));
}

std::shared_ptr<Node> gradient_edge(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return nullptr;
  TensorImpl* impl = t.unsafe_impl();
  if (impl->autograd.grad_fn) return impl->autograd.grad_fn;
  std::shared_ptr<Node> acc = impl->autograd.grad_accumulator.lock();
  if (!acc) {
    // The accumulator keeps the leaf alive while a graph refers to it.
    acc = std::make_shared<AccumulateGrad>(impl->shared_from_this());
    acc->out_shape = t.shape();
    acc->out_dtype = t.dtype();
    acc->out_device = t.device();
    // Runs as soon as its gradient is complete, not after every op node (which run latest-first): hooks see
    // each leaf's gradient while backward goes on (data parallel starts its all-reduces there).
    acc->seq = std::numeric_limits<uint64_t>::max();
    impl->autograd.grad_accumulator = acc;
  }
  return acc;
}

bool needs_grad(const std::vector<Tensor>& inputs) {
  if (!grad_enabled()) return false;
  for (const Tensor& t : inputs)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void attach(const std::shared_ptr<Node>& node, Tensor& out, const std::vector<Tensor>& inputs) {
  node->seq = g_seq.fetch_add(1);
  node->out_shape = out.shape();
  node->out_dtype = out.dtype();
  node->out_device = out.device();
  for (const Tensor& t : inputs) node->next.push_back(gradient_edge(t));
  AutogradMeta& meta = out.unsafe_impl()->autograd;
  meta.requires_grad = true;
  meta.grad_fn = node;
}

}  // namespace uoe::autograd
