// Engine: runs the recorded graph backward in topological order.
#pragma once
#include <vector>

#include "autograd/gradient_math.h"
#include "core/tensor.h"

namespace uoe::autograd {

// Backpropagates `grads[i]` from `roots[i]` (an undefined grad means ones, for scalars only),
// accumulating into the .grad of the leaves that require grad, with the op layer's arithmetic `math` (programs call
// ops::backward or Tensor::backward, which pass it). Unless retain_graph, the saved tensors of every node run are
// freed.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph,
              const GradientMath& math);

}  // namespace uoe::autograd
