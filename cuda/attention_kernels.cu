// uoe::cuda fused attention: the launch of the scalar kernels (cuda/attention_scalar.cuh; float, double, bf16
// storage) and the dispatch between them and the bf16 tensor-core kernels.
#include "cuda/attention_mma.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "core/allocator.h"
#include "core/error.h"
#include "core/slow_paths.h"
#include "cuda/attention_scalar.cuh"
#include "cuda/check.h"
#include "cuda/launch.h"
#include "cuda/stream.h"

namespace uoe::cuda {
namespace {

void check_shape(const AttnShape& s) {
  UOE_CHECK(s.B >= 0 && s.T >= 0 && s.Dh >= 0 && s.H > 0 && s.Hkv > 0, "attention: bad shape B=", s.B, " H=", s.H,
            " Hkv=", s.Hkv, " T=", s.T, " Dh=", s.Dh);
  UOE_CHECK(s.H % s.Hkv == 0, "attention: H=", s.H, " is not a multiple of Hkv=", s.Hkv);
}

int max_smem_optin(const LaunchContext& c, const char* op) {
  int v = 0;
  UOE_CUDA_CHECK(op, cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, c.device));
  return v;
}

// Tile rows: the largest of 64 / 32 / 16 (at most `pref`) whose shared memory fits the device.
int pick_bm(size_t (*elems)(int, int64_t), int64_t Dh, size_t csize, int max_smem, int pref, const char* op) {
  for (int bm : {64, 32, 16})
    if (bm <= pref && elems(bm, Dh) * csize <= size_t(max_smem)) return bm;
  fail("[", op, "] head dim ", Dh, " is too large for the CUDA attention kernels (shared memory ", max_smem,
       " bytes per block)");
}

template <typename Kernel>
void launch(Kernel kernel, int64_t blocks, size_t smem, const LaunchContext& c, const char* op, auto&&... args) {
  UOE_CHECK(blocks < (int64_t(1) << 31), "[", op, "] too many thread blocks (", blocks, ")");
  UOE_CUDA_CHECK(op, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  kernel<<<unsigned(blocks), kThreads, smem, c.stream>>>(args...);
  check_launch(op);
}

constexpr int preferred_bm(size_t csize) { return csize >= 8 ? 32 : 64; }

template <typename S, typename C>
void forward_scalar(const AttnShape& s, const S* q, AttnStrides qs, const S* k, AttnStrides ks, const S* v,
                    AttnStrides vs, S* out, AttnStrides os, C* lse) {
  const char* op = "scaled_dot_product_attention";
  check_shape(s);
  if (s.B == 0 || s.T == 0) return;
  const LaunchContext c = launch_context(op);
  if (s.Dh == 0) {
    const int64_t rows = s.B * s.H * s.T;
    attn_empty_lse_kernel<C><<<unsigned(std::min<int64_t>(ceil_div(rows, 256), 1 << 20)), 256, 0, c.stream>>>(
        rows, s.T, s.causal, lse);
    check_launch(op);
    return;
  }
  const int bm = pick_bm(fwd_smem_elems, s.Dh, sizeof(C), max_smem_optin(c, op), preferred_bm(sizeof(C)), op);
  Args<S, C> a = make_args<S, C>(s, bm);
  a.q = q, a.k = k, a.v = v, a.qs = qs, a.ks = ks, a.vs = vs, a.out = out, a.os = os, a.lse_out = lse;
  const size_t smem = fwd_smem_elems(bm, s.Dh) * sizeof(C);
  const int64_t blocks = a.nqb * s.B * s.H;
  if (bm == 64) launch(attn_fwd_kernel<S, C, 64>, blocks, smem, c, op, a);
  if (bm == 32) launch(attn_fwd_kernel<S, C, 32>, blocks, smem, c, op, a);
  if (bm == 16) launch(attn_fwd_kernel<S, C, 16>, blocks, smem, c, op, a);
}


template <typename S, typename C>
void launch_dsum(const AttnShape& s, const S* out, AttnStrides os, const S* dout, AttnStrides dos, C* dsum,
                 const LaunchContext& c, const char* op) {
  const int64_t rows = s.B * s.H * s.T;
  const unsigned blocks = unsigned(std::clamp<int64_t>(ceil_div(rows, 8), 1, int64_t(1) << 20));
  attn_dsum_kernel<S, C><<<blocks, 256, 0, c.stream>>>(s.B, s.H, s.T, s.Dh, out, os, dout, dos, dsum);
  check_launch(op);
}

template <typename S, typename C>
void backward_scalar(const AttnShape& s, const S* q, AttnStrides qs, const S* k, AttnStrides ks, const S* v,
                     AttnStrides vs, const S* out, AttnStrides os, const C* lse, const S* dout, AttnStrides dos, S* dq,
                     AttnStrides dqs, S* dk, AttnStrides dks, S* dv, AttnStrides dvs) {
  const char* op = "scaled_dot_product_attention backward";
  check_shape(s);
  if (s.B == 0 || s.T == 0 || s.Dh == 0) return;  // nothing to write
  const LaunchContext c = launch_context(op);
  const int max_smem = max_smem_optin(c, op);
  const int pref = preferred_bm(sizeof(C));
  const int bkv = pick_bm(kv_smem_elems, s.Dh, sizeof(C), max_smem, pref, op);
  const int bq = pick_bm(q_smem_elems, s.Dh, sizeof(C), max_smem, pref, op);
  DeviceBuffer dsum(c.device, size_t(s.B * s.H * s.T) * sizeof(C));
  launch_dsum(s, out, os, dout, dos, dsum.get<C>(), c, op);
  Args<S, C> a = make_args<S, C>(s, bkv);
  a.q = q, a.k = k, a.v = v, a.dout = dout, a.lse_in = lse, a.dsum = dsum.get<C>();
  a.qs = qs, a.ks = ks, a.vs = vs, a.os = os, a.dos = dos, a.dqs = dqs, a.dks = dks, a.dvs = dvs;
  a.dq = dq, a.dk = dk, a.dv = dv;
  {
    const size_t smem = kv_smem_elems(bkv, s.Dh) * sizeof(C);
    const int64_t blocks = a.nkb * s.B * s.Hkv;
    if (bkv == 64) launch(attn_bwd_kv_kernel<S, C, 64>, blocks, smem, c, op, a);
    if (bkv == 32) launch(attn_bwd_kv_kernel<S, C, 32>, blocks, smem, c, op, a);
    if (bkv == 16) launch(attn_bwd_kv_kernel<S, C, 16>, blocks, smem, c, op, a);
  }
  {
    a.nqb = ceil_div(s.T, bq), a.nkb = ceil_div(s.T, bq);
    const size_t smem = q_smem_elems(bq, s.Dh) * sizeof(C);
    const int64_t blocks = a.nqb * s.B * s.H;
    if (bq == 64) launch(attn_bwd_q_kernel<S, C, 64>, blocks, smem, c, op, a);
    if (bq == 32) launch(attn_bwd_q_kernel<S, C, 32>, blocks, smem, c, op, a);
    if (bq == 16) launch(attn_bwd_q_kernel<S, C, 16>, blocks, smem, c, op, a);
  }
}

bool strides_aligned(const AttnStrides& st) { return st.batch % 8 == 0 && st.head % 8 == 0 && st.time % 8 == 0; }

const __nv_bfloat16* bf(const BFloat16* p) { return reinterpret_cast<const __nv_bfloat16*>(p); }
__nv_bfloat16* bf(BFloat16* p) { return reinterpret_cast<__nv_bfloat16*>(p); }
const uint16_t* bits(const BFloat16* p) { return reinterpret_cast<const uint16_t*>(p); }
uint16_t* bits(BFloat16* p) { return reinterpret_cast<uint16_t*>(p); }

}  // namespace

// ---- public entry points ------------------------------------------------------------------------------------
template <typename T>
void attention_forward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                       AttnStrides vs, T* out, AttnStrides os, T* lse) {
  forward_scalar<T, T>(s, q, qs, k, ks, v, vs, out, os, lse);
}

template <typename T>
void attention_backward(const AttnShape& s, const T* q, AttnStrides qs, const T* k, AttnStrides ks, const T* v,
                        AttnStrides vs, const T* out, AttnStrides os, const T* lse, const T* dout, AttnStrides dos,
                        T* dq, AttnStrides dqs, T* dk, AttnStrides dks, T* dv, AttnStrides dvs) {
  backward_scalar<T, T>(s, q, qs, k, ks, v, vs, out, os, lse, dout, dos, dq, dqs, dk, dks, dv, dvs);
}

namespace {

enum class ScalarReason { none, head_dim, misaligned };

// Why bf16 calls with these arguments cannot take the tensor-core kernels (none: they can).
ScalarReason scalar_reason(const AttnShape& s, std::initializer_list<const void*> ptrs,
                           std::initializer_list<AttnStrides> strides) {
  if (!detail::mma_head_dim(s.Dh)) return ScalarReason::head_dim;
  for (const void* p : ptrs)
    if (!aligned16(p)) return ScalarReason::misaligned;
  for (const AttnStrides& st : strides)
    if (!strides_aligned(st)) return ScalarReason::misaligned;
  return ScalarReason::none;
}

// Counts a bf16 call that runs the scalar float32-compute kernels (core/slow_paths.h).
void count_scalar_fallback(ScalarReason reason, const AttnShape& s, const char* op) {
  const std::string cost = "; it runs the scalar float32 kernels on CUDA cores instead of tensor cores, "
                           "many times slower at long sequences";
  if (reason == ScalarReason::head_dim)
    slow_paths::count("attention_bf16_scalar.head_dim",
                      std::string(op) + " (bf16): head dim " + std::to_string(s.Dh) +
                          " is not supported by the tensor-core kernels (64, 96 or 128)" + cost);
  else
    slow_paths::count("attention_bf16_scalar.misaligned",
                      std::string(op) + " (bf16): an operand's address or batch/head/time stride is not 16-byte "
                                        "aligned (a view with an odd offset or stride)" + cost);
}

// Whether the call takes the tensor-core kernels; counts it when it does not.
bool tensor_cores_or_count(const AttnShape& s, std::initializer_list<const void*> ptrs,
                           std::initializer_list<AttnStrides> strides, const char* op) {
  const ScalarReason reason = scalar_reason(s, ptrs, strides);
  if (reason == ScalarReason::none) return true;
  count_scalar_fallback(reason, s, op);
  return false;
}

}  // namespace

bool attention_bf16_uses_tensor_cores(const AttnShape& s, std::initializer_list<const void*> ptrs,
                                      std::initializer_list<AttnStrides> strides) {
  return scalar_reason(s, ptrs, strides) == ScalarReason::none;
}

void attention_forward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                            const BFloat16* v, AttnStrides vs, BFloat16* out, AttnStrides os, float* lse) {
  check_shape(s);
  if (s.B == 0 || s.T == 0) return;
  if (tensor_cores_or_count(s, {q, k, v, out}, {qs, ks, vs, os}, "scaled_dot_product_attention"))
    return detail::attention_forward_mma(s, bits(q), qs, bits(k), ks, bits(v), vs, bits(out), os, lse);
  forward_scalar<__nv_bfloat16, float>(s, bf(q), qs, bf(k), ks, bf(v), vs, bf(out), os, lse);
}

void attention_backward_bf16(const AttnShape& s, const BFloat16* q, AttnStrides qs, const BFloat16* k, AttnStrides ks,
                             const BFloat16* v, AttnStrides vs, const BFloat16* out, AttnStrides os, const float* lse,
                             const BFloat16* dout, AttnStrides dos, BFloat16* dq, AttnStrides dqs, BFloat16* dk,
                             AttnStrides dks, BFloat16* dv, AttnStrides dvs) {
  const char* op = "scaled_dot_product_attention backward";
  check_shape(s);
  if (s.B == 0 || s.T == 0 || s.Dh == 0) return;
  if (tensor_cores_or_count(s, {q, k, v, dout, dq, dk, dv}, {qs, ks, vs, dos, dqs, dks, dvs}, op)) {
    const LaunchContext c = launch_context(op);
    DeviceBuffer dsum(c.device, size_t(s.B * s.H * s.T) * sizeof(float));
    launch_dsum(s, bf(out), os, bf(dout), dos, dsum.get<float>(), c, op);
    return detail::attention_backward_mma(s, bits(q), qs, bits(k), ks, bits(v), vs, lse, dsum.get<float>(),
                                          bits(dout), dos, bits(dq), dqs, bits(dk), dks, bits(dv), dvs);
  }
  backward_scalar<__nv_bfloat16, float>(s, bf(q), qs, bf(k), ks, bf(v), vs, bf(out), os, lse, bf(dout), dos, bf(dq),
                                        dqs, bf(dk), dks, bf(dv), dvs);
}

#define UOE_CUDA_ATTN_INSTANTIATE(T)                                                                              \
  template void attention_forward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*,     \
                                     AttnStrides, T*, AttnStrides, T*);                                            \
  template void attention_backward<T>(const AttnShape&, const T*, AttnStrides, const T*, AttnStrides, const T*,    \
                                      AttnStrides, const T*, AttnStrides, const T*, const T*, AttnStrides, T*,     \
                                      AttnStrides, T*, AttnStrides, T*, AttnStrides);
UOE_CUDA_ATTN_INSTANTIATE(float)
UOE_CUDA_ATTN_INSTANTIATE(double)
#undef UOE_CUDA_ATTN_INSTANTIATE

}  // namespace uoe::cuda
