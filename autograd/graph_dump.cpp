// DOT dump of the autograd graph: op boxes, leaf ellipses (named when the caller knows their names),
// shape-labelled edges, highlighted ops with a legend.
#include "autograd/graph_dump.h"

#include <sstream>
#include <unordered_map>
#include <vector>

#include "autograd/node.h"

namespace uoe::autograd {
namespace {

constexpr const char* kHighlightColor = "\"#f4a582\"";
constexpr const char* kParameterColor = "\"#d1e5f0\"";

// A double-quoted DOT string: quotes and backslashes escaped, line breaks as \n.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\n') out += "\\n";
    else out += (c == '"' || c == '\\') ? std::string{'\\', c} : std::string{c};
  }
  return out + "\"";
}

// The accumulator node of every named leaf that is part of a graph, with the leaf's name.
std::unordered_map<const Node*, std::string> leaf_labels(const DotOptions& options) {
  std::unordered_map<const Node*, std::string> labels;
  for (const auto& [name, t] : options.leaf_names) {
    if (!t.defined()) continue;
    // Looked up, not created: a leaf no graph uses has no accumulator.
    if (auto acc = t.unsafe_impl()->autograd.grad_accumulator.lock())
      labels[acc.get()] = name + " " + shape_str(t.shape());
  }
  return labels;
}

void write_legend(std::ostream& os, const DotOptions& options) {
  os << "  subgraph cluster_legend {\n    label=\"legend\";\n    style=dashed;\n"
     << "    legend_highlight [shape=box, style=filled, fillcolor=" << kHighlightColor
     << ", label=" << quoted(options.highlight_caption) << "];\n"
     << "    legend_op [shape=box, label=\"other op\\ndtype[output shape]\"];\n"
     << "    legend_parameter [shape=ellipse, style=filled, fillcolor=" << kParameterColor
     << ", label=\"parameter [shape]\"];\n"
     << "    legend_highlight -> legend_op [label=\"input shape\"];\n  }\n";
}

}  // namespace

std::string to_dot(const Tensor& root) { return to_dot(root, DotOptions{}); }

std::string to_dot(const Tensor& root, const DotOptions& options) {
  std::ostringstream os;
  os << "digraph autograd {\n  rankdir=BT;\n  node [fontname=\"monospace\"];\n  edge [fontname=\"monospace\"];\n";
  if (!options.title.empty()) os << "  label=" << quoted(options.title) << ";\n  labelloc=t;\n";
  if (!options.highlight.empty()) write_legend(os, options);
  std::shared_ptr<Node> start = gradient_edge(root);
  if (!start) return os.str() + "}\n";
  const std::unordered_map<const Node*, std::string> names = leaf_labels(options);
  // Depth-first from the root; every node gets an id the first time it is reached.
  std::unordered_map<Node*, int> ids;
  std::vector<Node*> stack{start.get()};
  ids[start.get()] = 0;
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    const bool leaf = dynamic_cast<AccumulateGrad*>(n) != nullptr;
    const auto named = names.find(n);
    os << "  n" << ids[n];
    if (named != names.end()) {
      os << " [shape=ellipse, style=filled, fillcolor=" << kParameterColor << ", label=" << quoted(named->second);
    } else {
      os << " [shape=" << (leaf ? "ellipse" : "box");
      if (options.highlight.count(n->name())) os << ", style=filled, fillcolor=" << kHighlightColor;
      os << ", label=" << quoted((leaf ? "leaf" : n->name()) + "\n" + dtype_name(n->out_dtype) + shape_str(n->out_shape));
    }
    os << "];\n";
    for (const auto& child : n->next) {
      if (!child) continue;
      auto [it, fresh] = ids.emplace(child.get(), int(ids.size()));
      if (fresh) stack.push_back(child.get());
      os << "  n" << it->second << " -> n" << ids[n] << " [label=" << quoted(shape_str(child->out_shape)) << "];\n";
    }
  }
  os << "}\n";
  return os.str();
}

}  // namespace uoe::autograd
