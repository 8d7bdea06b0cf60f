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

// Differentiable all_gather along dim 0 of equal parts: x [m, ...] on each rank -> [P·m, ...] in rank order.
// Backward sums every rank's gradient of the whole and hands each rank its own rows (a reduce_scatter).
Tensor all_gather_rows(const Tensor& x, Communicator& comm);

// ops::expert_ffn with the n = P·n_local experts split across the P ranks of `comm`: rank p holds experts
// [p·n_local, (p+1)·n_local) and computes them for the (token, slot) pairs of every rank routed to them. Each rank
// passes its own tokens and routing (indices of all n experts) and its own expert slices; the gradients of its
// slices collect the contributions of every rank's tokens. Same result as ops::expert_ffn on the whole.
// x: [T, d]; indices, weights: [T, K]; W_gate: [n_local, d_g, D]; W_up: [n_local, d, D]; W_down: [n_local, D, d];
// gate_input: undefined or [T, n, d_g] -> [T, d].
Tensor expert_parallel_ffn(Communicator& comm, const Tensor& x, const Tensor& indices, const Tensor& weights,
                           const Tensor& w_gate, const Tensor& w_up, const Tensor& w_down, int64_t r0, int64_t r1,
                           const Tensor& gate_input = Tensor());

}  // namespace uoe::nn
