// DOT dump of the autograd graph behind a tensor (render with Graphviz: dot -Tsvg).
#pragma once
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace uoe::autograd {

struct DotOptions {
  // Leaves drawn as "name [shape]" instead of "leaf" (e.g. a module's named_parameters()).
  std::vector<std::pair<std::string, Tensor>> leaf_names;
  // Op names (Node::name(), e.g. "expert_ffn") drawn filled, explained by a legend box.
  std::set<std::string> highlight;
  std::string highlight_caption = "highlighted op";
  std::string title;  // graph caption; none when empty
};

// One box per Node (its op name and output shape), one ellipse per leaf that requires grad,
// edges from each input to the node that consumed it, labelled with the input's shape.
std::string to_dot(const Tensor& root, const DotOptions& options);
std::string to_dot(const Tensor& root);

}  // namespace uoe::autograd
