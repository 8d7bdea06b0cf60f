// Backward through the recorded graph with the op layer's arithmetic (autograd/gradient_math.h): what
// Tensor::backward() runs, for code that starts from several roots at once (activation checkpointing).
#pragma once
#include <vector>

#include "core/tensor.h"

namespace uoe::ops {

// autograd::backward (autograd/engine.h) with the ops' sum, clone, fill and finiteness test.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grads, bool retain_graph = false);

}  // namespace uoe::ops
