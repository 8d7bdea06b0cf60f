// The tensor-core bf16 attention kernels (cuda/attention_mma_forward.cuh, attention_mma_backward.cuh) run unchanged
// on the CPU through the stand-in runtime and PTX of tests/cuda_emu/include, against attention computed in double
// from the same bf16 inputs. What this checks without a GPU: the fragment layouts and ldmatrix addressing, the
// masking of partial and causal tiles, grouped-query heads, both task orders and both forward tile heights, the
// cp.async groups (a tile read before its wait sees stale bytes), the shared-memory layout (every address checked
// against the launch's size) and that every output element is written and nothing past it. What it cannot check:
// timing, races between warps that the emulation happens to order, and the hardware's own rounding of the MMA sums.
// The CPU-vs-CUDA parity tests (tests/cuda/) judge the kernels on a GPU.
#include <gtest/gtest.h>

#include <atomic>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/attention_mma_backward.cuh"
#include "cuda/attention_mma_forward.cuh"

namespace uoe::cuda::detail {
namespace {

using cuda_emu::launch;

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }
uint16_t float_to_bf16(float f) { return __float2bfloat16_rn(f).x; }

// A buffer of n elements followed by a guard of kGuard elements; everything starts as `fill` (NaN for outputs).
template <class T>
struct Guarded {
  static constexpr size_t kGuard = 64;
  std::vector<T> data;
  size_t n;
  Guarded(size_t n, T fill) : data(n + kGuard, fill), n(n) {}
  T* p() { return data.data(); }
  bool guard_intact(T fill) const {
    for (size_t i = n; i < data.size(); ++i)
      if (std::memcmp(&data[i], &fill, sizeof(T)) != 0) return false;
    return true;
  }
};
const uint16_t kNanBf16 = 0xffff;
const float kNanF = std::bit_cast<float>(0xffffffffu);

// ||x - ref|| / ||ref|| over the first ref.size() elements.
template <class T>
double rel_err(const T* x, const std::vector<double>& ref) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double v;
    if constexpr (std::is_same_v<T, uint16_t>) v = bf16_to_float(x[i]);
    else v = x[i];
    num += (v - ref[i]) * (v - ref[i]), den += ref[i] * ref[i];
  }
  return std::sqrt(num / den);
}

struct Case {
  int64_t B, H, Hkv, T, Dh;
  bool causal;
};
std::string name(const Case& c) {
  return "B=" + std::to_string(c.B) + " H=" + std::to_string(c.H) + " Hkv=" + std::to_string(c.Hkv) +
         " T=" + std::to_string(c.T) + " Dh=" + std::to_string(c.Dh) + " causal=" + std::to_string(c.causal);
}

// q, out, dout (and dq) in [B, T, H, Dh] storage, k, v (and dk, dv) in [B, Hkv, T, Dh], as attention sees them.
struct Problem {
  Case c;
  AttnShape s;
  AttnStrides qs, ks;
  std::vector<uint16_t> q, k, v, dout;
  explicit Problem(const Case& c)
      : c(c), s{c.B, c.H, c.Hkv, c.T, c.Dh, 1.0 / std::sqrt(double(c.Dh)), c.causal},
        qs{c.T * c.H * c.Dh, c.Dh, c.H * c.Dh}, ks{c.Hkv * c.T * c.Dh, c.T * c.Dh, c.Dh} {
    std::mt19937 rng(uint32_t(c.T * 131 + c.Dh * 7 + c.H));
    std::normal_distribution<float> dist(0.0f, 1.0f);
    auto fill = [&](std::vector<uint16_t>& x, int64_t heads) {
      x.resize(size_t(c.B * heads * c.T * c.Dh));
      for (uint16_t& e : x) e = float_to_bf16(dist(rng));
    };
    fill(q, c.H), fill(k, c.Hkv), fill(v, c.Hkv), fill(dout, c.H);
  }
  int64_t at(AttnStrides st, int64_t b, int64_t h, int64_t t) const { return b * st.batch + h * st.head + t * st.time; }
  size_t q_elems() const { return q.size(); }
  size_t kv_elems() const { return k.size(); }
};

// Attention and its gradients in double from the bf16 inputs, in the kernels' layouts; lse [B, H, T].
struct Reference {
  std::vector<double> out, lse, dq, dk, dv;
  explicit Reference(const Problem& p) {
    const Case& c = p.c;
    out.assign(p.q_elems(), 0), dq.assign(p.q_elems(), 0), lse.assign(size_t(c.B * c.H * c.T), 0);
    dk.assign(p.kv_elems(), 0), dv.assign(p.kv_elems(), 0);
    auto x = [](const std::vector<uint16_t>& t, int64_t i) { return double(bf16_to_float(t[size_t(i)])); };
    std::vector<double> prob(size_t(c.T)), dprob(size_t(c.T));
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t i = 0; i < c.T; ++i) {
          const int64_t hk = h / (c.H / c.Hkv), qi = p.at(p.qs, b, h, i), keys = c.causal ? i + 1 : c.T;
          double mx = -INFINITY, sum = 0, D = 0;
          for (int64_t j = 0; j < keys; ++j) {
            double dot = 0;
            for (int64_t d = 0; d < c.Dh; ++d) dot += x(p.q, qi + d) * x(p.k, p.at(p.ks, b, hk, j) + d);
            prob[size_t(j)] = dot * p.s.scale;
            mx = std::max(mx, prob[size_t(j)]);
          }
          for (int64_t j = 0; j < keys; ++j) sum += std::exp(prob[size_t(j)] - mx);
          lse[size_t((b * c.H + h) * c.T + i)] = mx + std::log(sum);
          for (int64_t j = 0; j < keys; ++j) {
            const int64_t kj = p.at(p.ks, b, hk, j);
            prob[size_t(j)] = std::exp(prob[size_t(j)] - mx) / sum;
            double dp = 0;
            for (int64_t d = 0; d < c.Dh; ++d) {
              out[size_t(qi + d)] += prob[size_t(j)] * x(p.v, kj + d);
              dp += x(p.dout, qi + d) * x(p.v, kj + d);
            }
            dprob[size_t(j)] = dp;
            D += prob[size_t(j)] * dp;
          }
          for (int64_t j = 0; j < keys; ++j) {  // ds = p (dp - D); dq = scale ds k, dk += scale ds q, dv += p dout
            const int64_t kj = p.at(p.ks, b, hk, j);
            const double ds = prob[size_t(j)] * (dprob[size_t(j)] - D);
            for (int64_t d = 0; d < c.Dh; ++d) {
              dq[size_t(qi + d)] += p.s.scale * ds * x(p.k, kj + d);
              dk[size_t(kj + d)] += p.s.scale * ds * x(p.q, qi + d);
              dv[size_t(kj + d)] += prob[size_t(j)] * x(p.dout, qi + d);
            }
          }
        }
  }
};

// Runs `kernel` on `blocks` blocks of kThreads with `smem` bytes of dynamic shared memory; every thread must end with
// no cp.async copy outstanding.
template <class Kernel>
void run(Kernel kernel, const MmaArgs& a, int64_t blocks, size_t smem, const std::string& what) {
  std::atomic<int> pending{0};
  launch(
      unsigned(blocks), kThreads,
      [&] {
        kernel(a);
        pending += int(cp_async_pending());
      },
      smem);
  EXPECT_EQ(pending.load(), 0) << what << ": cp.async copies never waited for";
  for (const std::string& f : emu_faults()) ADD_FAILURE() << what << ": " << f;
}

template <int DH>
void check(const Case& c) {
  const Problem p(c);
  const Reference ref(p);
  for (int setting = 0; setting < 3; ++setting) {  // both forward tile heights, both task orders
    const int m_tiles = setting == 0 ? 1 : 2;
    const bool tiles_inner = setting != 2;
    const std::string what = name(c) + " m_tiles=" + std::to_string(m_tiles) + " tiles_inner=" +
                             std::to_string(tiles_inner);
    Guarded<uint16_t> out(p.q_elems(), kNanBf16), dq(p.q_elems(), kNanBf16), dk(p.kv_elems(), kNanBf16),
        dv(p.kv_elems(), kNanBf16);
    Guarded<float> lse(ref.lse.size(), kNanF), dsum(ref.lse.size(), kNanF);
    MmaArgs a = shape_args(p.s, tiles_inner);
    a.q = p.q.data(), a.k = p.k.data(), a.v = p.v.data(), a.dout = p.dout.data();
    a.qs = a.os = a.dos = a.dqs = p.qs, a.ks = a.vs = a.dks = a.dvs = p.ks;
    a.out = out.p(), a.lse_out = lse.p(), a.dq = dq.p(), a.dk = dk.p(), a.dv = dv.p();
    if (m_tiles == 1) run(attn_fwd_mma_kernel<DH, 1>, a, a.nqb * c.B * c.H, fwd_smem<DH, 1>(), what);
    else run(attn_fwd_mma_kernel<DH, 2>, a, (c.T + 127) / 128 * c.B * c.H, fwd_smem<DH, 2>(), what);
    EXPECT_LE(rel_err(out.p(), ref.out), 1e-2) << what;
    EXPECT_LE(rel_err(lse.p(), ref.lse), 1e-3) << what;

    // D = rowsum(dout ⊙ out) from the kernel's bf16 out, as the library's launcher computes it
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t h = 0; h < c.H; ++h)
        for (int64_t i = 0; i < c.T; ++i) {
          float D = 0;
          for (int64_t d = 0; d < c.Dh; ++d)
            D += bf16_to_float(p.dout[size_t(p.at(p.qs, b, h, i) + d)]) * bf16_to_float(out.p()[p.at(p.qs, b, h, i) + d]);
          dsum.p()[(b * c.H + h) * c.T + i] = D;
        }
    a.lse_in = lse.p(), a.dsum = dsum.p();
    run(attn_bwd_kv_mma_kernel<DH>, a, a.nkb * c.B * c.Hkv, kv_smem<DH>(), what + " dk/dv");
    run(attn_bwd_q_mma_kernel<DH>, a, a.nqb * c.B * c.H, q_smem<DH>(), what + " dq");
    EXPECT_LE(rel_err(dq.p(), ref.dq), 2e-2) << what;
    EXPECT_LE(rel_err(dk.p(), ref.dk), 2e-2) << what;
    EXPECT_LE(rel_err(dv.p(), ref.dv), 2e-2) << what;
    EXPECT_TRUE(out.guard_intact(kNanBf16) && dq.guard_intact(kNanBf16) && dk.guard_intact(kNanBf16) &&
                dv.guard_intact(kNanBf16) && lse.guard_intact(kNanF))
        << what << ": a kernel wrote past its output";
  }
}

// Grouped queries (two q heads per kv head), a partial last tile, causal.
TEST(CudaAttentionMmaEmulated, HeadDim64CausalGroupedPartialTile) { check<64>({1, 2, 1, 100, 64, true}); }
// Without the mask; two batches; a full and a partial 64-row tile.
TEST(CudaAttentionMmaEmulated, HeadDim128NoMaskTwoBatches) { check<128>({2, 1, 1, 80, 128, false}); }
// The 3b presets' head dim; 128-query tiles: a full one and a partial one; three q heads per kv head.
TEST(CudaAttentionMmaEmulated, HeadDim96CausalFullAndPartial128QueryTiles) { check<96>({1, 3, 1, 150, 96, true}); }
// Fewer rows than one MMA tile: most of every fragment is padding.
TEST(CudaAttentionMmaEmulated, HeadDim64FiveRows) { check<64>({1, 2, 2, 5, 64, true}); }
}  // namespace
}  // namespace uoe::cuda::detail
