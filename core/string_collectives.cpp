// all_gather_strings: an all-reduce of the lengths, then an all-gather of equal-sized padded rows.
#include "core/string_collectives.h"

#include <algorithm>
#include <cstring>

namespace uoe {

std::vector<std::string> all_gather_strings(Communicator& comm, const std::string& mine) {
  const auto n = size_t(comm.size());
  const TensorOptions int64 = TensorOptions{}.with_dtype(DType::Int64);
  // CPU tensors written and read through their pointers: core has no ops (from_vector, zeros, to_vector).
  const Tensor lengths = empty({int64_t(n)}, int64);
  int64_t* length = lengths.data_ptr<int64_t>();
  std::fill(length, length + n, 0);
  length[comm.rank()] = int64_t(mine.size());
  comm.all_reduce(lengths);  // the same shape on every rank, whatever the strings
  // int64 words (a dtype every backend moves); at least one, so that no rank sends an empty row
  const int64_t words = std::max<int64_t>(1, (*std::max_element(length, length + n) + 7) / 8);
  const Tensor row = empty({1, words}, int64);
  std::memset(row.raw_data(), 0, size_t(words) * 8);
  std::memcpy(row.data_ptr<int64_t>(), mine.data(), mine.size());
  const Tensor rows = empty({int64_t(n), words}, int64);
  comm.all_gather(row, rows);
  std::vector<std::string> out(n);
  const auto* bytes = reinterpret_cast<const char*>(rows.data_ptr<int64_t>());
  for (size_t r = 0; r < n; ++r) out[r].assign(bytes + r * size_t(words) * 8, size_t(length[r]));
  return out;
}

}  // namespace uoe
