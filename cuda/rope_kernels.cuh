// The CUDA RoPE kernels (launched by cuda/rope_kernels.cu; run on the CPU by uoe_cuda_emu_tests): the [T, Dh/2]
// cos/sin table in double, and the rotation of every row, V elements per access.
#pragma once
#include <cmath>
#include <cstdint>

#include "cuda/storage_access.cuh"

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
// x, y stored as S; the table and the arithmetic in C = compute_t<S>.
// block (threadIdx.x over the h / V vectors of a half row, threadIdx.y over rows)
template <class S, int V, class C = compute_t<S>>
__global__ void __launch_bounds__(256) rope_kernel(int64_t rows, int64_t T, int64_t H, int64_t h, const S* x,
                                                   const C* cs, const C* sn, S* y) {
  using W = Vec<S, V>;
  using WC = Vec<C, V>;
  const int64_t hv = h / V;
  for (int64_t r = int64_t(blockIdx.x) * blockDim.y + threadIdx.y; r < rows; r += int64_t(gridDim.x) * blockDim.y) {
    const int64_t t = (r / H) % T;
    const W *xa = reinterpret_cast<const W*>(x + r * 2 * h), *xb = reinterpret_cast<const W*>(x + r * 2 * h + h);
    const WC *c = reinterpret_cast<const WC*>(cs + t * h), *s = reinterpret_cast<const WC*>(sn + t * h);
    W *ya = reinterpret_cast<W*>(y + r * 2 * h), *yb = reinterpret_cast<W*>(y + r * 2 * h + h);
    for (int64_t j = threadIdx.x; j < hv; j += blockDim.x) {
      const W a = xa[j], b = xb[j];
      const WC cc = c[j], ss = s[j];
      W oa, ob;
#pragma unroll
      for (int k = 0; k < V; ++k) {
        const C av = load_as<C>(&a.v[k]), bv = load_as<C>(&b.v[k]);
        store_as(&oa.v[k], av * cc.v[k] - bv * ss.v[k]);
        store_as(&ob.v[k], av * ss.v[k] + bv * cc.v[k]);
      }
      ya[j] = oa;
      yb[j] = ob;
    }
  }
}

}  // namespace
}  // namespace uoe::cuda
