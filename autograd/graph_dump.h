// DOT dump of the autograd graph behind a tensor (render with Graphviz: dot -Tsvg).
#pragma once
#include <string>

#include "core/tensor.h"

namespace uoe::autograd {

// One box per Node (its op name and output shape), one ellipse per leaf that requires grad,
// edges from each input to the node that consumed it.
std::string to_dot(const Tensor& root);

}  // namespace uoe::autograd
