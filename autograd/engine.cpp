// Engine: dependency counting from the roots, then nodes run latest-first as their inputs complete.
#include "autograd/engine.h"

#include <queue>
#include <unordered_map>

#include "autograd/node.h"
#include "core/error.h"

namespace uoe::autograd {
namespace {

struct LaterFirst {
  bool operator()(const Node* a, const Node* b) const { return a->seq < b->seq; }
};

}  // namespace

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
              const GradientMath& math) {
  UOE_CHECK(roots.size() == grads.size(), "[backward] ", roots.size(), " roots but ", grads.size(), " grads");
  NoGradGuard no_grad;  // backward formulas record no graph
  std::unordered_map<Node*, Tensor> buffer;
  std::unordered_map<Node*, int> deps;
  std::vector<std::shared_ptr<Node>> starts;

  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& root = roots[i];
    UOE_CHECK(root.defined() && root.requires_grad(),
              "[backward] the tensor does not require grad and has no grad_fn: nothing to differentiate");
    Tensor g = grads[i];
    if (!g.defined()) {
      UOE_CHECK(root.numel() == 1, "[backward] grad can be omitted only for a scalar output, got shape ",
                shape_str(root.shape()), "; pass a gradient of that shape");
      g = math.full(root.shape(), 1.0, TensorOptions{}.with_dtype(root.dtype()).with_device(root.device()));
    }
    UOE_CHECK(g.shape() == root.shape() && g.dtype() == root.dtype() && g.device() == root.device(),
              "[backward] the gradient ", dtype_name(g.dtype()), shape_str(g.shape()), " on ", g.device().str(),
              " does not match the output ", dtype_name(root.dtype()), shape_str(root.shape()), " on ",
              root.device().str(), " (same shape, dtype and device expected)");
    std::shared_ptr<Node> n = gradient_edge(root);
    Tensor& slot = buffer[n.get()];
    slot = slot.defined() ? math.add(slot, g) : g;
    starts.push_back(n);
  }

  // Count, for every reachable node, how many edges lead into it.
  std::vector<Node*> stack;
  std::unordered_map<Node*, bool> seen;
  for (auto& n : starts)
    if (!seen[n.get()]) { seen[n.get()] = true; stack.push_back(n.get()); }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (auto& child : n->next) {
      if (!child) continue;
      deps[child.get()]++;
      if (!seen[child.get()]) { seen[child.get()] = true; stack.push_back(child.get()); }
    }
  }

  std::priority_queue<Node*, std::vector<Node*>, LaterFirst> ready;
  for (auto& n : starts)
    if (deps[n.get()] == 0) ready.push(n.get());
  std::unordered_map<Node*, bool> queued;
  while (!ready.empty()) {
    Node* node = ready.top();
    ready.pop();
    if (queued[node]) continue;
    queued[node] = true;
    Tensor grad = buffer[node];
    buffer.erase(node);
    if (!grad.defined())
      grad = math.full(node->out_shape, 0.0,
                       TensorOptions{}.with_dtype(node->out_dtype).with_device(node->out_device));
    for (const GradHook& hook : node->pre_hooks) {
      Tensor r = hook(grad);
      if (r.defined()) grad = r;
    }
    if (Node* child = node->next.size() == 1 ? node->next[0].get() : nullptr; child && !anomaly_enabled()) {
      // A gradient that adds into its input's running sum in place (a slice's: only the sliced region, no zeros
      // around it), when that sum is the engine's alone
      auto it = buffer.find(child);
      if (it != buffer.end() && it->second.is_contiguous() && it->second.sole_owner() &&
          node->add_into(it->second, grad)) {
        if (!retain_graph) node->release_saved();
        if (--deps[child] == 0) ready.push(child);
        continue;
      }
    }
    std::vector<Tensor> in_grads = node->apply(grad);
    if (!retain_graph) node->release_saved();
    if (auto* leaf = dynamic_cast<AccumulateGrad*>(node)) {
      leaf->accumulate(in_grads.at(0), math);
      continue;
    }
    UOE_CHECK(in_grads.empty() || in_grads.size() == node->next.size(), "[backward] ", node->name(),
              " returned ", in_grads.size(), " gradients for ", node->next.size(), " inputs");
    for (size_t i = 0; i < node->next.size(); ++i) {
      Node* child = node->next[i].get();
      if (!child) continue;
      const Tensor& g = in_grads.empty() ? Tensor() : in_grads[i];
      if (g.defined()) {
        UOE_CHECK(g.shape() == child->out_shape, "[backward] ", node->name(), " produced a gradient of shape ",
                  shape_str(g.shape()), " for input ", i, " of shape ", shape_str(child->out_shape));
        if (anomaly_enabled())
          UOE_CHECK(math.all_finite(g), "[anomaly] the backward of '", node->name(),
                    "' produced NaN or Inf in the gradient of its input ", i, " (shape ", shape_str(g.shape()), ")");
        Tensor& slot = buffer[child];
        slot = slot.defined() ? math.add(slot, g) : g;
      }
      if (--deps[child] == 0) ready.push(child);
    }
  }
}

}  // namespace uoe::autograd
