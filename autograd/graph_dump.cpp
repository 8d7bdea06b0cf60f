// DOT dump of the autograd graph.
#include "autograd/graph_dump.h"

#include <sstream>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"

namespace uoe::autograd {

std::string to_dot(const Tensor& root) {
  std::ostringstream os;
  os << "digraph autograd {\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n";
  std::shared_ptr<Node> start = gradient_edge(root);
  if (!start) return os.str() + "}\n";
  std::unordered_map<Node*, int> ids;
  std::vector<Node*> stack{start.get()};
  ids[start.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    const bool leaf = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    os << "  n" << ids[n] << " [shape=" << (leaf ? "ellipse" : "box") << ", label=\""
       << (leaf ? "leaf" : n->name()) << "\\n" << dtype_name(n->out_dtype) << shape_str(n->out_shape) << "\"];\n";
    for (const auto& child : n->next) {
      if (!child) continue;
      auto [it, fresh] = ids.emplace(child.get(), int(ids.size()));
      if (fresh) stack.push_back(child.get());
      os << "  n" << it->second << " -> n" << ids[n] << " [label=\"" << shape_str(child->out_shape) << "\"];\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace uoe::autograd
