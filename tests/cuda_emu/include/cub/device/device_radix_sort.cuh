// A CPU stand-in for CUB's DeviceRadixSort::SortPairs (tests/cuda_emu), as CUB documents it: a stable ascending
// sort of the keys on bits [begin_bit, end_bit), the values moved with them; a first call with no temporary storage
// only reports the bytes it needs. Queued on the stream like any device work.
#pragma once
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <vector>

namespace cub {

struct DeviceRadixSort {
  template <class Key, class Value, class NumItems>
  static cudaError_t SortPairs(void* temp, size_t& temp_bytes, const Key* keys_in, Key* keys_out,
                               const Value* values_in, Value* values_out, NumItems n, int begin_bit = 0,
                               int end_bit = int(sizeof(Key) * 8), cudaStream_t stream = nullptr) {
    const size_t need = size_t(std::max<NumItems>(n, 1)) * sizeof(int64_t);  // a permutation's worth
    if (!temp) {
      temp_bytes = need;
      return cudaSuccess;
    }
    if (temp_bytes < need || begin_bit < 0 || end_bit > int(sizeof(Key) * 8) || begin_bit >= end_bit)
      return uoe::cuda_emu::fail_with(cudaErrorInvalidValue);
    uoe::cuda_emu::enqueue(stream, [=] {
      const auto bits = [&](Key k) {
        const uint64_t u = uint64_t(k) >> begin_bit;
        return end_bit - begin_bit >= 64 ? u : u & ((uint64_t(1) << (end_bit - begin_bit)) - 1);
      };
      std::vector<int64_t> order(static_cast<size_t>(n));
      std::iota(order.begin(), order.end(), int64_t(0));
      std::stable_sort(order.begin(), order.end(),
                       [&](int64_t a, int64_t b) { return bits(keys_in[a]) < bits(keys_in[b]); });
      for (size_t i = 0; i < order.size(); ++i) {
        keys_out[i] = keys_in[order[i]];
        values_out[i] = values_in[order[i]];
      }
    });
    return cudaSuccess;
  }
};

}  // namespace cub
