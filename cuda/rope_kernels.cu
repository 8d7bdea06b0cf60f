// CUDA RoPE: the launch of the kernels of cuda/rope_kernels.cuh, a [T, Dh/2] cos/sin table computed in double (as on
// the CPU), then one pass rotating every row. bfloat16 rows are rotated in float32 (a float32 table) and rounded once.
#include "ops/kernels/rope.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/rope_kernels.cuh"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

template <class S, int V, class C>
void launch_rope(cudaStream_t stream, int64_t rows, int64_t T, int64_t H, int64_t h, const S* x, const C* cs,
                 const C* sn, S* y) {
  const int64_t hv = h / V;
  const int bx = hv <= 32 ? 32 : hv <= 64 ? 64 : 128, by = 256 / bx;
  const int64_t blocks = std::clamp<int64_t>((rows + by - 1) / by, 1, int64_t(1) << 24);
  rope_kernel<S, V><<<unsigned(blocks), dim3(unsigned(bx), unsigned(by)), 0, stream>>>(rows, T, H, h, x, cs, sn, y);
}

}  // namespace

Tensor rope(const Tensor& x, double base, int64_t pos_offset, bool inverse) {
  UOE_CHECK(x.is_cuda() && x.dim() == 4 && x.is_contiguous() && x.size(3) % 2 == 0,
            "[rope] the CUDA kernel needs a contiguous [B, T, H, Dh] tensor on a GPU with an even Dh, got ",
            shape_str(x.shape()), " on ", x.device().str());
  const DeviceGuard guard(x.device().index);
  const int64_t B = x.size(0), T = x.size(1), H = x.size(2), Dh = x.size(3), h = Dh / 2;
  const TensorOptions opt = TensorOptions{}.with_dtype(x.dtype()).with_device(x.device());
  Tensor y = empty(x.shape(), opt);
  auto run = [&](auto tag) {
    using S = typename decltype(tag)::type;
    using C = compute_t<S>;
    if (x.numel() == 0 || h == 0) return;
    const cudaStream_t stream = current_stream(x.device().index);
    // [cos; sin] in the compute dtype, freed in stream order
    const Tensor table = empty({2, T, h}, TensorOptions{}.with_dtype(dtype_of<C>()).with_device(x.device()));
    C* cs = table.data_ptr<C>();
    C* sn = cs + T * h;
    const unsigned tblocks = unsigned(std::min<int64_t>((T * h + 255) / 256, 4096));
    rope_table_kernel<C><<<tblocks, 256, 0, stream>>>(T, h, Dh, base, pos_offset, inverse, cs, sn);
    check_launch("rope");
    const S* px = reinterpret_cast<const S*>(x.raw_data());
    S* py = reinterpret_cast<S*>(y.raw_data());
    constexpr int kV = int(16 / sizeof(S));  // 16-byte loads of x and y; the table's vectors are as aligned
    const bool vec = h % kV == 0 && reinterpret_cast<uintptr_t>(px) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(py) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(cs) % (kV * sizeof(C)) == 0;
    if (vec) launch_rope<S, kV>(stream, B * T * H, T, H, h, px, cs, sn, py);
    else launch_rope<S, 1>(stream, B * T * H, T, H, h, px, cs, sn, py);
    check_launch("rope");
  };
  if (x.dtype() == DType::BFloat16) run(TypeTag<__nv_bfloat16>{});
  else dispatch_float(x.dtype(), "rope", run);
  return y;
}

}  // namespace uoe::cuda
