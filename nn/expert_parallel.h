// Expert parallelism: the experts of a layer split across the ranks of a group, tokens dispatched to the rank that
// owns their expert and the results combined back, both with all_to_all.
#pragma once
#include <vector>

#include "core/communicator.h"
#include "core/tensor.h"

namespace uoe::nn {

// Differentiable uneven all_to_all along dim 0 (Communicator::all_to_all): x [Σ send_rows, ...] -> [Σ recv_rows, ...].
// Backward is the reverse all_to_all of the gradient (send and receive rows swapped). Every rank of `comm` must
// call it, and run its backward, in the same order; with grad mode on, x must require grad on all ranks or none.
Tensor all_to_all(const Tensor& x, Communicator& comm, const std::vector<int64_t>& send_rows,
                  const std::vector<int64_t>& recv_rows);

// ops::expert_ffn with the n experts split across the P ranks of `comm` (n % P == 0): rank p computes experts
// [p·n/P, (p+1)·n/P) for the (token, slot) pairs of every rank routed to them. Each rank passes its own tokens and
// routing and the full expert tensors, of which it reads only its slice; so the other experts' weight gradients
// are 0 on this rank, and summing every gradient over the ranks (what DataParallel does) gives each expert the
// gradient of every rank's tokens. Same arguments and result as ops::expert_ffn.
// x: [T, d]; indices, weights: [T, K]; W_gate: [n, d_g, D]; W_up: [n, d, D]; W_down: [n, D, d];
// gate_input: undefined or [T, n, d_g] -> [T, d].
Tensor expert_parallel_ffn(Communicator& comm, const Tensor& x, const Tensor& indices, const Tensor& weights,
                           const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down, int64_t r0, int64_t r1,
                           const Tensor& gate_input = Tensor());

}  // namespace uoe::nn
