// Activation checkpointing: run a function without keeping its intermediate activations, and recompute it
// during backward. Memory drops to the function's inputs; the cost is one more forward.
#pragma once
#include <functional>
#include <vector>

#include "core/tensor.h"

namespace uoe::nn {

// outputs = f(x), recorded as one node that saves only x. Its backward reruns f on a detached copy of x with
// grad mode on and backpropagates every output's incoming gradient through that recomputation, so the
// parameters f uses receive their gradients there and x receives its own. f must be deterministic (the
// recomputation must equal the forward) and its outputs must share x's dtype and device (several outputs,
// e.g. a block's output and its auxiliary loss, travel packed in one buffer). Runs f plainly when grad mode is
// off or x does not require grad.
std::vector<Tensor> checkpoint(const std::function<std::vector<Tensor>(const Tensor&)>& f, const Tensor& x);

}  // namespace uoe::nn
