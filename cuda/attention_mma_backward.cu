// uoe::cuda bf16 attention backward on tensor cores: FlashAttention-2's dk/dv pass (per key tile) and dq pass (per
// query tile) with mma.sync m16n8k16 (bf16 operands, float32 accumulation), head dims 64, 96 and 128.
#include "cuda/attention_mma_backward.cuh"
#include "cuda/attention_mma_launch.cuh"

namespace uoe::cuda::detail {

void attention_backward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                            const uint16_t* v, AttnStrides vs, const float* lse, const float* dsum,
                            const uint16_t* dout, AttnStrides dos, uint16_t* dq, AttnStrides dqs, uint16_t* dk,
                            AttnStrides dks, uint16_t* dv, AttnStrides dvs) {
  const char* op = "scaled_dot_product_attention backward";
  with_head_dim(s, op, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    if (s.B == 0 || s.T == 0) return;
    const LaunchContext c = launch_context(op);
    MmaArgs a = make_args(s, op);
    a.q = q, a.k = k, a.v = v, a.dout = dout, a.lse_in = lse, a.dsum = dsum;
    a.qs = qs, a.ks = ks, a.vs = vs, a.dos = dos, a.dqs = dqs, a.dks = dks, a.dvs = dvs;
    a.dq = dq, a.dk = dk, a.dv = dv;
    launch(attn_bwd_kv_mma_kernel<DH>, a.nkb * s.B * s.Hkv, kv_smem<DH>(), c, op, a);
    launch(attn_bwd_q_mma_kernel<DH>, a.nqb * s.B * s.H, q_smem<DH>(), c, op, a);
  });
}

}  // namespace uoe::cuda::detail
