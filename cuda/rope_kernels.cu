// CUDA RoPE: a [T, Dh/2] cos/sin table computed in double (as on the CPU), then one pass rotating every row.
#include "cuda/rope_kernels.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "core/error.h"
#include "cuda/check.h"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

template <class S, int V>
struct alignas(sizeof(S) * V) Vec {
  S v[V];
};

// cs[t, i] = cos(angle), sn[t, i] = ±sin(angle), angle = (t + pos_offset) * base^(-2i/Dh), all in double.
template <class S>
__global__ void rope_table_kernel(int64_t T, int64_t h, int64_t Dh, double base, int64_t pos_offset, bool inverse,
                                  S* cs, S* sn) {
  for (int64_t k = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; k < T * h; k += int64_t(gridDim.x) * blockDim.x) {
    const int64_t t = k / h, i = k % h;
    const double angle = double(t + pos_offset) * pow(base, -2.0 * double(i) / double(Dh));
    cs[k] = S(cos(angle));
    sn[k] = S(inverse ? -sin(angle) : sin(angle));
  }
}

// y[i] = x[i] cos - x[i+h] sin ; y[i+h] = x[i] sin + x[i+h] cos, for i < h, on every row of x: [rows = B*T*H, 2h].
// block (threadIdx.x over the h / V vectors of a half row, threadIdx.y over rows)
template <class S, int V>
__global__ void __launch_bounds__(256) rope_kernel(int64_t rows, int64_t T, int64_t H, int64_t h, const S* x,
                                                   const S* cs, const S* sn, S* y) {
  using W = Vec<S, V>;
  const int64_t hv = h / V;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; r < rows; r += int64_t(gridDim.x) * blockDim.y) {
    const int64_t t = (r / H) % T;
    const W *xa = reinterpret_cast<const W*>(x + r * 2 * h), *xb = reinterpret_cast<const W*>(x + r * 2 * h + h);
    const W *c = reinterpret_cast<const W*>(cs + t * h), *s = reinterpret_cast<const W*>(sn + t * h);
    W *ya = reinterpret_cast<W*>(y + r * 2 * h), *yb = reinterpret_cast<W*>(y + r * 2 * h + h);
    for (int64_t j = threadIdx.x; j < hv; j += blockDim.x) {
      const W a = xa[j], b = xb[j], cc = c[j], ss = s[j];
      W oa, ob;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        oa.v[k] = a.v[k] * cc.v[k] - b.v[k] * ss.v[k];
        ob.v[k] = a.v[k] * ss.v[k] + b.v[k] * cc.v[k];
      }
      ya[j] = oa;
      yb[j] = ob;
    }
  }
}

template <class S, int V>
void launch_rope(cudaStream_t stream, int64_t rows, int64_t T, int64_t H, int64_t h, const S* x, const S* cs,
                 const S* sn, S* y) {
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
  dispatch_float(x.dtype(), "rope", [&](auto tag) {
    using S = typename decltype(tag)::type;
    if (x.numel() == 0 || h == 0) return;
    const cudaStream_t stream = current_stream(x.device().index);
    const Tensor table = empty({2, T, h}, opt);  // [cos; sin], freed in stream order
    S* cs = table.data_ptr<S>();
    S* sn = cs + T * h;
    const unsigned tblocks = unsigned(std::min<int64_t>((T * h + 255) / 256, 4096));
    rope_table_kernel<S><<<tblocks, 256, 0, stream>>>(T, h, Dh, base, pos_offset, inverse, cs, sn);
    check_launch("rope");
    const S* px = x.data_ptr<S>();
    S* py = y.data_ptr<S>();
    constexpr int kV = int(16 / sizeof(S));
    const bool vec = h % kV == 0 && reinterpret_cast<uintptr_t>(px) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(py) % 16 == 0 && reinterpret_cast<uintptr_t>(cs) % 16 == 0;
    if (vec) launch_rope<S, kV>(stream, B * T * H, T, H, h, px, cs, sn, py);
    else launch_rope<S, 1>(stream, B * T * H, T, H, h, px, cs, sn, py);
    check_launch("rope");
  });
  return y;
}

}  // namespace uoe::cuda
