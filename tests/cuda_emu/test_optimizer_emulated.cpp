// The CUDA optimiser kernels (cuda/optimizer_kernels.cuh) run unchanged on the CPU through the stand-in runtime of
// tests/cuda_emu/include: AdamW and SGD against their formulas in the kernels' operation order (float32 bit for bit;
// bfloat16 parameters through the same stochastic rounding), the multi-tensor AdamW bit for bit against the same
// formula, how tensors are packed into launches (every chunk once, the tensor and block limits, a tensor
// continued across launches), and the squared norm's blocks and final sum. The CPU-vs-CUDA parity tests
// (tests/cuda/) judge the kernels on a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "cuda/optimizer_kernels.cuh"
#include "cuda/sum_doubles.cuh"
#include "tests/cuda_emu/emu_check.h"

namespace uoe::cuda {
namespace {

AdamWStep step_of(int t) {
  const float b1 = 0.9f, b2 = 0.95f;
  return {1e-2f, b1, b2, 1e-8f, 0.1f, float(1.0 - std::pow(double(b1), t)), float(1.0 - std::pow(double(b2), t))};
}

std::vector<float> normal(size_t n, uint32_t seed, float scale = 1.0f) {
  return cuda_emu::as<float>(cuda_emu::bf16_normal(n, seed, scale));
}
std::vector<__nv_bfloat16> bf16_normal(size_t n, uint32_t seed) {
  return cuda_emu::as<__nv_bfloat16>(cuda_emu::bf16_normal(n, seed));
}
float value(float x) { return x; }
float value(__nv_bfloat16 x) { return __bfloat162float(x); }

// One parameter's buffers, stored as P.
template <class P>
struct Param {
  std::vector<P> p, g;
  std::vector<float> m, v;
  Param(size_t n, uint32_t seed) : m(normal(n, seed + 2, 0.1f)), v(normal(n, seed + 3, 0.1f)) {
    for (float& x : v) x = x * x;
    if constexpr (std::is_same_v<P, float>) p = normal(n, seed), g = normal(n, seed + 1);
    else p = bf16_normal(n, seed), g = bf16_normal(n, seed + 1);
  }
  AdamWTensor tensor(float wd, RoundingKey key) {
    return {p.data(), g.data(), std::is_same_v<P, __nv_bfloat16>, m.data(), v.data(), int64_t(p.size()), wd, key};
  }
};
template <class P>
bool same_bits(const Param<P>& a, const Param<P>& b) {
  return std::memcmp(a.p.data(), b.p.data(), a.p.size() * sizeof(P)) == 0 &&
         std::memcmp(a.m.data(), b.m.data(), a.m.size() * 4) == 0 && std::memcmp(a.v.data(), b.v.data(), a.v.size() * 4) == 0;
}

// One float32 rounding per operation: this program fuses a plain `a * b + c` into an FMA, as nvcc does.
float mul(float a, float b) { return __fmul_rn(a, b); }
float add(float a, float b) { return __fadd_rn(a, b); }

// AdamW in the kernel's operation order, one float32 rounding per operation, bfloat16 stored stochastically.
template <class P>
void adamw_reference(Param<P>& q, const AdamWStep& s, RoundingKey key) {
  const float decay = decay_of(s.lr, s.weight_decay), step = s.lr / s.bias_correction1;
  const float inv_bc2 = 1.0f / s.bias_correction2;
  for (size_t i = 0; i < q.p.size(); ++i) {
    const float gi = value(q.g[i]);
    const float mi = add(mul(s.beta1, q.m[i]), mul(1.0f - s.beta1, gi));
    const float vi = add(mul(s.beta2, q.v[i]), mul(mul(1.0f - s.beta2, gi), gi));
    q.m[i] = mi, q.v[i] = vi;
    const float x = add(mul(value(q.p[i]), decay), -mul(step, mi) / add(std::sqrt(mul(vi, inv_bc2)), s.eps));
    if constexpr (std::is_same_v<P, float>) {
      q.p[i] = x;
    } else {
      const uint32_t b = std::bit_cast<uint32_t>(x);
      q.p[i] = __ushort_as_bfloat16(bf16_round_stochastic(b, rounding_noise(uint64_t(key.first_index) + i, key.step, b)));
    }
  }
}

template <class P>
void check_adamw_kernel() {
  Param<P> got(70001, 1), want = got;
  const RoundingKey key{7, 300};
  for (int t = 1; t <= 3; ++t) {
    const AdamWStep s = step_of(t);
    cuda_emu::launch(4, kThreads, [&] {
      adamw_kernel<P>(got.p.data(), got.g.data(), got.m.data(), got.v.data(), int64_t(got.p.size()),
                      decay_of(s.lr, s.weight_decay), consts_of(s), key);
    });
    adamw_reference(want, s, key);
  }
  EXPECT_TRUE(same_bits(got, want));
}
TEST(CudaOptimizerEmulated, AdamWFloatIsTheFormulaBitForBit) { check_adamw_kernel<float>(); }
TEST(CudaOptimizerEmulated, AdamWBf16IsTheFormulaWithTheCpuRounding) { check_adamw_kernel<__nv_bfloat16>(); }

TEST(CudaOptimizerEmulated, SgdIsTheFormulaBitForBit) {
  Param<float> got(5003, 9), want = got;
  cuda_emu::launch(3, kThreads, [&] {
    sgd_kernel<float>(got.p.data(), got.g.data(), got.v.data(), int64_t(got.p.size()), 0.05f, 0.9f, 0.01f, {});
  });
  for (size_t i = 0; i < want.p.size(); ++i) {
    const float pi = want.p[i];
    want.v[i] = add(add(mul(0.9f, want.v[i]), want.g[i]), mul(0.01f, pi));
    want.p[i] = add(pi, -mul(0.05f, want.v[i]));
  }
  EXPECT_TRUE(same_bits(got, want));
}

// 40 parameters (more than a launch's 32), float and bfloat16, one of two chunks: the multi-tensor kernel gives the
// formula's bits, as the per-tensor kernel does (above).
TEST(CudaOptimizerEmulated, MultiTensorAdamWIsTheFormulaBitForBit) {
  std::vector<Param<float>> f32, f32_ref;
  std::vector<Param<__nv_bfloat16>> b16, b16_ref;
  for (int i = 0; i < 40; ++i) {
    const size_t n = i == 17 ? size_t(kChunk) + 123 : size_t(37 * i + 1);
    if (i % 3 == 1) b16.emplace_back(n, 100 + i);
    else f32.emplace_back(n, 100 + i);
  }
  f32_ref = f32, b16_ref = b16;
  std::vector<AdamWTensor> tensors;
  for (size_t i = 0; i < f32.size(); ++i) tensors.push_back(f32[i].tensor(0.01f * float(i), {}));
  for (size_t i = 0; i < b16.size(); ++i) tensors.push_back(b16[i].tensor(0.02f, {3, int64_t(i)}));
  AdamWStep s = step_of(2);
  int launches = 0;
  for_each_multi_launch(tensors, s, [&](const MultiArgs& args, int blocks) {
    ++launches;
    cuda_emu::launch(unsigned(blocks), kMultiThreads, [&] { adamw_multi_kernel(args, consts_of(s)); });
  });
  EXPECT_EQ(launches, 2);
  for (size_t i = 0; i < f32.size(); ++i) {
    s.weight_decay = 0.01f * float(i);
    adamw_reference(f32_ref[i], s, {});
    EXPECT_TRUE(same_bits(f32[i], f32_ref[i])) << "float tensor " << i;
  }
  s.weight_decay = 0.02f;
  for (size_t i = 0; i < b16.size(); ++i) {
    adamw_reference(b16_ref[i], s, {3, int64_t(i)});
    EXPECT_TRUE(same_bits(b16[i], b16_ref[i])) << "bf16 tensor " << i;
  }
}

// The packing alone, on fake buffers (never touched): 25M elements (383 chunks, past a launch's 320 blocks) between
// 70 small tensors. Every chunk of every tensor lands in exactly one block, in order, with its tensor's fields.
TEST(CudaOptimizerEmulated, PackingCoversEveryChunkOnceWithinTheLimits) {
  std::vector<AdamWTensor> tensors;
  for (int i = 0; i < 71; ++i) {
    const int64_t n = i == 30 ? 25'000'000 : i == 50 ? 0 : 1000 + i;
    auto* base = reinterpret_cast<float*>(uintptr_t(0x1000) * uintptr_t(i + 1));
    tensors.push_back({base, base + 1, i % 2 == 1, base + 2, base + 3, n, 0.001f * float(i), {uint32_t(i), i}});
  }
  std::map<std::pair<float*, int64_t>, int> seen;  // (m buffer, chunk) -> times
  for_each_multi_launch(tensors, step_of(1), [&](const MultiArgs& args, int blocks) {
    EXPECT_GE(blocks, 1);
    EXPECT_LE(blocks, kMaxBlocks);
    for (int b = 0; b < blocks; ++b) {
      const int t = args.tensor[b];
      ASSERT_LT(t, kMaxTensors);
      const auto i = size_t((uintptr_t(args.m[t]) - 2 * sizeof(float)) / 0x1000 - 1);
      ASSERT_LT(i, tensors.size());
      const AdamWTensor& want = tensors[i];
      EXPECT_TRUE(args.p[t] == want.p && args.g[t] == want.g && args.v[t] == want.v && args.n[t] == want.n &&
                  args.bf16[t] == want.bf16 && args.key[t].step == want.key.step &&
                  args.key[t].first_index == want.key.first_index && args.decay[t] == decay_of(1e-2f, want.weight_decay))
          << "tensor " << i;
      ++seen[{args.m[t], args.chunk[b]}];
    }
  });
  for (const AdamWTensor& t : tensors)
    for (int64_t c = 0; c < (t.n + kChunk - 1) / kChunk; ++c) EXPECT_EQ((seen[{t.m, c}]), 1) << "n=" << t.n << " chunk " << c;
  EXPECT_EQ(seen.size(), size_t(70 + (25'000'000 + kChunk - 1) / kChunk - 1));
}

TEST(CudaOptimizerEmulated, SquaredNormBlocksAndTheirSum) {
  const std::vector<__nv_bfloat16> g = bf16_normal(size_t(2 * kChunk + 999), 5);
  const int64_t n = int64_t(g.size()), blocks = (n + kChunk - 1) / kChunk;
  std::vector<double> part(size_t(blocks), NAN);
  double out = NAN, want = 0;
  cuda_emu::launch(unsigned(blocks), kThreads, [&] { squares_kernel<__nv_bfloat16>(g.data(), n, kChunk, part.data()); });
  cuda_emu::launch(1, kThreads, [&] { sum_doubles_kernel<kThreads>(part.data(), blocks, &out); });
  for (const auto& x : g) want += double(__bfloat162float(x)) * double(__bfloat162float(x));
  EXPECT_NEAR(out, want, 1e-12 * want);
}

}  // namespace
}  // namespace uoe::cuda
