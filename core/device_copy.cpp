// Device copies through the CUDA backend's registered copy, and host_contiguous's gather over strides.
#include "core/device_copy.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"

namespace uoe {
namespace {

DeviceCopy g_cuda_copy = nullptr;

// A CPU view with `t`'s geometry over a host copy of the storage elements that `t` reaches.
Tensor host_view(const Tensor& t) {
  if (t.is_cpu()) return t.detach();
  int64_t first = t.offset(), last = t.offset();
  for (int64_t d = 0; d < t.dim(); ++d) {
    const int64_t reach = (t.size(d) - 1) * t.stride(d);
    first += std::min<int64_t>(reach, 0);
    last += std::max<int64_t>(reach, 0);
  }
  const Tensor span = empty({last - first + 1}, TensorOptions{}.with_dtype(t.dtype()));
  const auto* from = static_cast<const unsigned char*>(t.storage()->data()) + first * int64_t(t.itemsize());
  copy_across_devices(span.raw_data(), Device::cpu(), from, t.device(), size_t(span.numel()) * t.itemsize());
  return alias_with(span, t.shape(), t.strides(), t.offset() - first);
}

// Copies the elements of the CPU view `src` in row-major order to `dst`, a row of the innermost dimension at a time
// when that dimension is dense.
void gather(const Tensor& src, unsigned char* dst) {
  const int64_t dims = src.dim();
  const bool dense_rows = dims > 0 && src.stride(dims - 1) == 1;
  const int64_t row = dense_rows ? src.size(dims - 1) : 1;  // elements copied at once
  const int64_t outer = dense_rows ? dims - 1 : dims;       // dimensions walked one index at a time
  const size_t item = src.itemsize(), row_bytes = size_t(row) * item;
  const auto* base = static_cast<const unsigned char*>(src.raw_data());
  std::vector<int64_t> index(size_t(outer), 0);
  for (int64_t done = 0; done < src.numel(); done += row) {
    int64_t at = 0;
    for (int64_t d = 0; d < outer; ++d) at += index[size_t(d)] * src.stride(d);
    std::memcpy(dst, base + at * int64_t(item), row_bytes);
    dst += row_bytes;
    for (int64_t d = outer - 1; d >= 0 && ++index[size_t(d)] == src.size(d); --d) index[size_t(d)] = 0;
  }
}

}  // namespace

void register_cuda_copy(DeviceCopy copy) { g_cuda_copy = copy; }

void copy_across_devices(void* dst, Device dst_device, const void* src, Device src_device, size_t nbytes) {
  if (dst_device.is_cpu() && src_device.is_cpu()) {
    if (nbytes) std::memcpy(dst, src, nbytes);
    return;
  }
  UOE_CHECK(g_cuda_copy, "[copy] a copy from ", src_device.str(), " to ", dst_device.str(),
            " needs a CUDA build with a visible GPU");
  g_cuda_copy(dst, dst_device, src, src_device, nbytes);
}

Tensor host_contiguous(const Tensor& t) {
  if (t.numel() == 0) return empty(t.shape(), TensorOptions{}.with_dtype(t.dtype()));
  const Tensor host = host_view(t);
  if (host.is_contiguous()) return host;
  const Tensor out = empty(t.shape(), TensorOptions{}.with_dtype(t.dtype()));
  gather(host, static_cast<unsigned char*>(out.raw_data()));
  return out;
}

}  // namespace uoe
