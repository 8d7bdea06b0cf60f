// CUDA copy with dtype conversion and fill: one elementwise loop (elementwise_loop.cuh) per dtype pair, with the
// bf16/f16 conversions of core/half.h written for the device bit for bit (cuda/half_convert.cuh).
#include "ops/kernels/copy.h"

#include <cstring>
#include <type_traits>

#include "cuda/elementwise_loop.cuh"
#include "cuda/half_convert.cuh"

namespace uoe::cuda {
namespace {

template <typename U>
struct Constant {
  U value;
  __device__ __forceinline__ U operator()() const { return value; }
};

template <typename F>
void dispatch_bits(size_t size, F&& f) {
  switch (size) {
    case 1: return f(TypeTag<uint8_t>{});
    case 2: return f(TypeTag<uint16_t>{});
    case 4: return f(TypeTag<uint32_t>{});
    case 8: return f(TypeTag<uint64_t>{});
    default: fail("[copy] internal: element size ", size);
  }
}

void check_device(const char* op, const Tensor& dst, const Tensor& src) {
  UOE_CHECK(dst.is_cuda() && src.is_cuda() && dst.device() == src.device(), "[", op,
            "] CUDA kernel needs both tensors on one GPU, got ", dst.device().str(), " and ", src.device().str());
}

}  // namespace

void copy_cast(const Tensor& dst, const Tensor& src) {
  check_device("copy", dst, src);
  if (dst.numel() == 0) return;
  if (dst.dtype() == src.dtype()) {
    if (dst.is_contiguous() && src.is_contiguous() && dst.shape() == src.shape()) {
      const int device = dst.device().index;
      DeviceGuard guard(device);
      UOE_CUDA_CHECK("copy", cudaMemcpyAsync(dst.raw_data(), src.raw_data(), size_t(dst.numel()) * dst.itemsize(),
                                             cudaMemcpyDeviceToDevice, current_stream(device)));
      return;
    }
    // Same dtype: move the bits.
    dispatch_bits(dst.itemsize(), [&](auto tag) {
      using U = typename decltype(tag)::type;
      elementwise<U, U>("copy", Cast<U, U>{}, dst, {&src});
    });
    return;
  }
  dispatch_all(dst.dtype(), [&](auto to_tag) {
    using To = device_t<typename decltype(to_tag)::type>;
    dispatch_all(src.dtype(), [&](auto from_tag) {
      using From = device_t<typename decltype(from_tag)::type>;
      if constexpr (!std::is_same_v<To, From>) elementwise<To, From>("copy", Cast<To, From>{}, dst, {&src});
    });
  });
}

void fill(const Tensor& dst, double value) {
  UOE_CHECK(dst.is_cuda(), "[fill] CUDA kernel got a tensor on ", dst.device().str());
  if (dst.numel() == 0) return;
  // The value converted exactly as the CPU converts it, then its bits written everywhere.
  const Tensor one = empty({}, TensorOptions{}.with_dtype(dst.dtype()));
  cpu::fill(one, value);
  dispatch_bits(dst.itemsize(), [&](auto tag) {
    using U = typename decltype(tag)::type;
    U bits;
    std::memcpy(&bits, one.raw_data(), sizeof(U));
    elementwise<U>("fill", Constant<U>{bits}, dst, {});
  });
}

}  // namespace uoe::cuda
