// Argument checks shared by the communicator backends; errors read "[op] rank r of N: ...".
#pragma once
#include <string>
#include <vector>

#include "core/communicator.h"

namespace uoe::collective {

// "[op] rank r of N: ", the start of every error a collective raises.
std::string where(const Communicator& c, const char* op);
// `t` is defined and contiguous; `role` names it in the error ("input", "output", "tensor").
void check_tensor(const Communicator& c, const char* op, const Tensor& t, const char* role = "tensor");
// input and output have the same dtype and device, and both pass check_tensor.
void check_pair(const Communicator& c, const char* op, const Tensor& input, const Tensor& output);
// Elements per row along dim 0 (0-d tensors are not split into rows: an error).
int64_t row_numel(const Communicator& c, const char* op, const Tensor& t);
// input [size·n, ...] and output [n, ...] with the same row shape.
void check_reduce_scatter(const Communicator& c, const Tensor& input, const Tensor& output);
// The rows every rank contributes to all_gather (`rows` resolved: empty means an even split), checked against
// the input and the output.
std::vector<int64_t> gather_rows(const Communicator& c, const Tensor& input, const Tensor& output,
                                 const std::vector<int64_t>& rows);
// One count per rank, none negative, summing to the input's and the output's dim 0; same row shape.
void check_all_to_all(const Communicator& c, const Tensor& input, const std::vector<int64_t>& send_rows,
                      const Tensor& output, const std::vector<int64_t>& recv_rows);
void check_root(const Communicator& c, const char* op, int root);
// Offsets of consecutive blocks of `rows[j]` rows: {0, rows[0], rows[0] + rows[1], ...}.
std::vector<int64_t> row_offsets(const std::vector<int64_t>& rows);

}  // namespace uoe::collective
