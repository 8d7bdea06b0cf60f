// Argument checks of the collectives: the same validation and the same messages on every backend.
#include "core/collective_checks.h"

#include <numeric>

#include "core/error.h"

namespace uoe::collective {
namespace {

std::string rows_str(const std::vector<int64_t>& rows) {
  std::string s = "[";
  for (size_t i = 0; i < rows.size(); ++i) {
    if (i) s += ",";
    s += std::to_string(rows[i]);
  }
  return s + "]";
}

// The shape of one row: every dim but the first.
Shape row_shape(const Tensor& t) { return Shape(t.shape().begin() + 1, t.shape().end()); }

void check_counts(const Communicator& c, const char* op, const std::vector<int64_t>& rows, const char* name) {
  UOE_CHECK(int64_t(rows.size()) == c.size(), where(c, op), name, " has ", rows.size(), " entries ",
            rows_str(rows), " but there are ", c.size(), " ranks");
  for (int64_t r : rows) UOE_CHECK(r >= 0, where(c, op), name, " ", rows_str(rows), " has a negative count");
}

void check_rows_sum(const Communicator& c, const char* op, const std::vector<int64_t>& rows, const char* name,
                    const Tensor& t, const char* role) {
  const int64_t total = std::accumulate(rows.begin(), rows.end(), int64_t(0));
  UOE_CHECK(total == t.size(0), where(c, op), name, " ", rows_str(rows), " adds up to ", total, " rows but the ",
            role, " is ", shape_str(t.shape()));
}

}  // namespace

std::string where(const Communicator& c, const char* op) {
  return std::string("[") + op + "] rank " + std::to_string(c.rank()) + " of " + std::to_string(c.size()) + ": ";
}

void check_tensor(const Communicator& c, const char* op, const Tensor& t, const char* role) {
  UOE_CHECK(t.defined(), where(c, op), "the ", role, " is an undefined tensor");
  UOE_CHECK(t.is_contiguous(), where(c, op), "the ", role, " ", shape_str(t.shape()),
            " must be contiguous (call .contiguous() first)");
}

void check_pair(const Communicator& c, const char* op, const Tensor& input, const Tensor& output) {
  check_tensor(c, op, input, "input");
  check_tensor(c, op, output, "output");
  UOE_CHECK(input.dtype() == output.dtype(), where(c, op), "the input is ", dtype_name(input.dtype()),
            " but the output is ", dtype_name(output.dtype()));
  UOE_CHECK(input.device() == output.device(), where(c, op), "the input is on ", input.device().str(),
            " but the output is on ", output.device().str());
}

int64_t row_numel(const Communicator& c, const char* op, const Tensor& t) {
  UOE_CHECK(t.dim() >= 1, where(c, op), "a 0-d tensor has no rows to split; give it a shape such as [1]");
  return shape_numel(row_shape(t));
}

void check_reduce_scatter(const Communicator& c, const Tensor& input, const Tensor& output) {
  const char* op = "reduce_scatter";
  check_pair(c, op, input, output);
  row_numel(c, op, input);
  UOE_CHECK(output.dim() == input.dim() && row_shape(input) == row_shape(output) &&
                input.size(0) == output.size(0) * c.size(),
            where(c, op), "the input ", shape_str(input.shape()), " must be [size * n, ...] for the output ",
            shape_str(output.shape()), " (size ", c.size(), ")");
}

std::vector<int64_t> gather_rows(const Communicator& c, const Tensor& input, const Tensor& output,
                                 const std::vector<int64_t>& rows) {
  const char* op = "all_gather";
  check_pair(c, op, input, output);
  row_numel(c, op, output);
  UOE_CHECK(input.dim() == output.dim() && row_shape(input) == row_shape(output), where(c, op), "the input ",
            shape_str(input.shape()), " and the output ", shape_str(output.shape()), " must have the same row shape");
  std::vector<int64_t> resolved = rows;
  if (resolved.empty()) {
    UOE_CHECK(output.size(0) % c.size() == 0, where(c, op), "the output ", shape_str(output.shape()),
              " does not split evenly over ", c.size(), " ranks; pass the rows of each rank");
    resolved.assign(size_t(c.size()), output.size(0) / c.size());
  }
  check_counts(c, op, resolved, "rows");
  check_rows_sum(c, op, resolved, "rows", output, "output");
  UOE_CHECK(input.size(0) == resolved[size_t(c.rank())], where(c, op), "the input ", shape_str(input.shape()),
            " must have this rank's ", resolved[size_t(c.rank())], " rows of ", rows_str(resolved));
  return resolved;
}

void check_all_to_all(const Communicator& c, const Tensor& input, const std::vector<int64_t>& send_rows,
                      const Tensor& output, const std::vector<int64_t>& recv_rows) {
  const char* op = "all_to_all";
  check_pair(c, op, input, output);
  row_numel(c, op, input);
  UOE_CHECK(input.dim() == output.dim() && row_shape(input) == row_shape(output), where(c, op), "the input ",
            shape_str(input.shape()), " and the output ", shape_str(output.shape()), " must have the same row shape");
  check_counts(c, op, send_rows, "send_rows");
  check_counts(c, op, recv_rows, "recv_rows");
  check_rows_sum(c, op, send_rows, "send_rows", input, "input");
  check_rows_sum(c, op, recv_rows, "recv_rows", output, "output");
}

void check_root(const Communicator& c, const char* op, int root) {
  UOE_CHECK(root >= 0 && root < c.size(), where(c, op), "root ", root, " is not a rank (there are ", c.size(), ")");
}

std::vector<int64_t> row_offsets(const std::vector<int64_t>& rows) {
  std::vector<int64_t> offsets(rows.size(), 0);
  for (size_t j = 1; j < rows.size(); ++j) offsets[j] = offsets[j - 1] + rows[j - 1];
  return offsets;
}

}  // namespace uoe::collective
