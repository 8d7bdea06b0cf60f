// autograd_from_scratch: a lesson in how the library's reverse-mode autograd records a graph while ops run
// and replays it backward. Builds y = Σ a ⊙ sigmoid(a ⊙ b), prints every recorded node and its inputs,
// walks the graph, runs backward, checks the result against gradients derived by hand, shows a hook and
// retain_grad, and prints the graph as Graphviz DOT.
// Usage: autograd_from_scratch [--quick]   (--quick runs the same lesson: it is small already)
#include <cstdio>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <tuple>

#include "autograd/graph_dump.h"
#include "autograd/grad_mode.h"
#include "autograd/node.h"
#include "core/error.h"
#include "ops/ops.h"

using namespace uoe;

namespace {

Tensor leaf(std::vector<double> values) {
  return from_vector(values, {int64_t(values.size())}).requires_grad_();  // float64 [3]
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return ops::max(ops::abs(a - b)).item<double>(); }

// What a tensor knows about its history: a leaf has none; any other tensor points at the Node that made it.
void describe(const std::string& name, const Tensor& t, const std::map<const autograd::Node*, std::string>& leaves) {
  std::printf("%-3s %-10s", name.c_str(), shape_str(t.shape()).c_str());
  if (t.is_leaf()) {
    std::printf("leaf (requires_grad=%s): its gradient will be summed into %s.grad()\n",
                t.requires_grad() ? "true" : "false", name.c_str());
    return;
  }
  std::printf("grad_fn = %-8s inputs:", t.grad_fn()->name().c_str());
  for (const auto& input : t.grad_fn()->next) {
    if (!input) std::printf("  (constant: no gradient)");
    else if (leaves.count(input.get())) std::printf("  AccumulateGrad of %s", leaves.at(input.get()).c_str());
    else std::printf("  %s node", input->name().c_str());
  }
  std::printf("\n");
}

// Depth-first walk from the root: each node once, ops with their creation number (backward runs the
// highest number first, so every node runs after all the nodes that feed it gradient).
void walk(const std::shared_ptr<autograd::Node>& node, const std::map<const autograd::Node*, std::string>& leaves,
          std::set<const autograd::Node*>& seen, int depth) {
  const bool first = seen.insert(node.get()).second;
  const auto leaf_name = leaves.find(node.get());
  const std::string label = leaf_name != leaves.end() ? "AccumulateGrad of " + leaf_name->second
                                                      : node->name() + "  seq " + std::to_string(node->seq);
  std::printf("%*s%s  out %s%s\n", 2 * depth, "", label.c_str(), shape_str(node->out_shape).c_str(),
              first ? "" : "  (reached again: the gradients of both uses add up here)");
  if (!first) return;
  for (const auto& input : node->next)
    if (input) walk(input, leaves, seen, depth + 1);
}

}  // namespace

int main() {
  try {
    std::printf("==== 1. Leaves: tensors the user creates and asks gradients for ====\n");
    const Tensor a = leaf({0.5, -1.0, 2.0}), b = leaf({1.5, 0.25, -0.5});
    std::cout << "a = " << a << "\nb = " << b << "\n";

    std::printf("\n==== 2. Forward: every op records a Node (its backward) with edges to its inputs ====\n");
    const Tensor z = a * b;            // [3]
    const Tensor s = ops::sigmoid(z);  // [3]
    const Tensor p = a * s;            // [3]  a is used twice
    const Tensor y = ops::sum(p);      // []   the scalar we differentiate
    const Tensor constant = a * 2.0;   // the 2.0 becomes a constant tensor: an input without gradient
    // A leaf's gradients go to one AccumulateGrad node, shared by every use of the leaf; the graph keeps
    // it alive (so it is looked up now, while the graph exists).
    const std::map<const autograd::Node*, std::string> leaves = {{autograd::gradient_edge(a).get(), "a"},
                                                                 {autograd::gradient_edge(b).get(), "b"}};
    for (const auto& [name, t] : std::vector<std::pair<std::string, Tensor>>{
             {"a", a}, {"z", z}, {"s", s}, {"p", p}, {"y", y}, {"2a", constant}})
      describe(name, t, leaves);
    {
      NoGradGuard no_grad;  // like torch.no_grad(): ops run but record nothing
      std::printf("under NoGradGuard, a * b records %s\n", (a * b).grad_fn() ? "a node" : "no node");
    }

    std::printf("\n==== 3. The graph, walked from y back to the leaves ====\n");
    std::set<const autograd::Node*> seen;
    walk(y.grad_fn(), leaves, seen, 0);

    std::printf("\n==== 4. Hooks and retain_grad: looking at gradients inside the graph ====\n");
    // A hook runs when the gradient reaches its tensor; returning an undefined Tensor keeps the
    // gradient as it is (returning a tensor would replace it).
    s.register_hook([](const Tensor& g) {
      std::cout << "hook on s sees dy/ds = " << g << "\n";
      return Tensor();
    });
    z.retain_grad();  // a non-leaf's gradient is dropped after use unless retained
    y.backward();

    std::printf("\n==== 5. Backward vs gradients derived by hand ====\n");
    // y = Σ a σ(ab):  dy/ds = a,  dy/dz = a σ(1-σ),  dy/da = σ + a σ(1-σ) b (two uses of a),  dy/db = a² σ(1-σ)
    Tensor dz_hand, da_hand, db_hand;
    {
      NoGradGuard no_grad;
      const Tensor sig = ops::sigmoid(a * b), dsig = sig * (1.0 - sig);
      dz_hand = a * dsig;
      da_hand = sig + a * dsig * b;
      db_hand = a * a * dsig;
    }
    std::cout << "z.grad() (retained) = " << z.grad() << "\na.grad() = " << a.grad() << "\nb.grad() = " << b.grad()
              << "\n";
    for (const auto& [what, engine, hand] : {std::tuple{"dy/dz", z.grad(), dz_hand}, std::tuple{"dy/da", a.grad(), da_hand},
                                             std::tuple{"dy/db", b.grad(), db_hand}}) {
      const double diff = max_abs_diff(engine, hand);
      UOE_CHECK(diff < 1e-12, what, ": backward and the hand formula differ by ", diff);
      std::printf("check: %s = hand formula (max |diff| %.1e)\n", what, diff);
    }
    UOE_CHECK(!s.grad().defined(), "s did not call retain_grad, so its gradient must not be kept");

    std::printf("\n==== 6. Saved tensors are freed after backward ====\n");
    bool refused = false;
    try {
      y.backward();
    } catch (const Error& e) {
      refused = true;
      std::printf("second backward: %s\n", e.what());
    }
    UOE_CHECK(refused, "a second backward through a freed graph must fail");

    std::printf("\n==== 7. The graph as DOT (render: dot -Tsvg graph.dot -o graph.svg) ====\n");
    autograd::DotOptions options;
    options.leaf_names = {{"a", a}, {"b", b}};
    options.highlight = {"sigmoid"};
    options.highlight_caption = "nonlinearity";
    std::cout << autograd::to_dot(y, options);
    std::printf("\nall checks passed\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "autograd_from_scratch FAILED: %s\n", e.what());
    return 1;
  }
  return 0;
}
