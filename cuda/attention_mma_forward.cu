// uoe::cuda bf16 attention forward on tensor cores: FlashAttention-2 with mma.sync m16n8k16 (bf16 operands, float32
// accumulation), head dims 64, 96 and 128, 64 or 128 queries per block, cp.async double-buffered K/V tiles.
#include <atomic>

#include "cuda/attention_mma_forward.cuh"
#include "cuda/attention_mma_launch.cuh"

namespace uoe::cuda::detail {
namespace {

std::atomic<int> g_forward_m_tiles{2};
std::atomic<bool> g_tiles_inner{true};

}  // namespace

void set_attention_forward_m_tiles(int m_tiles) {
  UOE_CHECK(m_tiles == 1 || m_tiles == 2, "[set_attention_forward_m_tiles] 1 or 2 m-tiles per warp, got ", m_tiles);
  g_forward_m_tiles = m_tiles;
}
int attention_forward_m_tiles() { return g_forward_m_tiles; }
void set_attention_tiles_inner(bool tiles_inner) { g_tiles_inner = tiles_inner; }
bool attention_tiles_inner() { return g_tiles_inner; }

void attention_forward_mma(const AttnShape& s, const uint16_t* q, AttnStrides qs, const uint16_t* k, AttnStrides ks,
                           const uint16_t* v, AttnStrides vs, uint16_t* out, AttnStrides os, float* lse) {
  const char* op = "scaled_dot_product_attention";
  with_head_dim(s, op, [&](auto dh) {
    constexpr int DH = decltype(dh)::value;
    if (s.B == 0 || s.T == 0) return;
    const LaunchContext c = launch_context(op);
    MmaArgs a = make_args(s, op);
    a.q = q, a.k = k, a.v = v, a.out = out, a.lse_out = lse, a.qs = qs, a.ks = ks, a.vs = vs, a.os = os;
    auto run = [&](auto m_tiles) {  // one block per (b, h, tile of 64·MT queries)
      constexpr int MT = decltype(m_tiles)::value;
      launch(attn_fwd_mma_kernel<DH, MT>, (s.T + kBQ * MT - 1) / (kBQ * MT) * s.B * s.H, fwd_smem<DH, MT>(), c, op,
             a);
    };
    if (attention_forward_m_tiles() == 2) run(std::integral_constant<int, 2>{});
    else run(std::integral_constant<int, 1>{});
  });
}

}  // namespace uoe::cuda::detail
