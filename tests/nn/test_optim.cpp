// Optimisers against their formulas, the warmup + cosine schedule, global-norm clipping, and Module state dicts.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/allocator.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/ops.h"

namespace uoe::nn {
namespace {

// A module with one decayed matrix and one vector (no decay).
class Toy : public Module {
 public:
  Toy() {
    w = register_parameter("w", from_vector<float>({1.0f, -2.0f, 0.5f, 3.0f}, {2, 2}));
    b = register_parameter("b", from_vector<float>({0.25f, -0.75f}, {2}));
  }
  Tensor w, b;
};

TEST(Optim, AdamWMatchesItsFormula) {
  Toy m;
  AdamW opt(m.named_parameters(), {0.9, 0.95, 1e-8, 0.1});
  const std::vector<float> g = {0.5f, -1.0f, 2.0f, 0.1f};
  double p[4] = {1.0, -2.0, 0.5, 3.0}, mm[4] = {}, vv[4] = {};
  for (int step = 1; step <= 3; ++step) {
    m.w.set_grad(from_vector(g, {2, 2}));
    m.b.set_grad(from_vector<float>({1.0f, 1.0f}, {2}));
    opt.step(0.01);
    for (int i = 0; i < 4; ++i) {
      mm[i] = 0.9 * mm[i] + 0.1 * g[i];
      vv[i] = 0.95 * vv[i] + 0.05 * g[i] * g[i];
      const double mhat = mm[i] / (1 - std::pow(0.9, step)), vhat = vv[i] / (1 - std::pow(0.95, step));
      p[i] = p[i] * (1 - 0.01 * 0.1) - 0.01 * mhat / (std::sqrt(vhat) + 1e-8);
    }
  }
  const auto w = m.w.to_vector<float>();
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(w[i], p[i], 1e-5);
  // the vector gets no weight decay: after 3 identical gradients of 1, b moves by ~3 lr
  EXPECT_NEAR(m.b.to_vector<float>()[0], 0.25 - 0.03, 1e-4);
  EXPECT_EQ(opt.state().back().second.item<int64_t>(), 3);
}

TEST(Optim, SgdMomentumMatchesItsFormula) {
  Toy m;
  SGD opt(m.named_parameters(), 0.9, 0.0);
  for (int step = 0; step < 2; ++step) {
    m.b.set_grad(from_vector<float>({1.0f, 2.0f}, {2}));
    opt.step(0.1);
  }
  // v1 = g, v2 = 0.9 g + g: total move 0.1 * (1 + 1.9) g
  EXPECT_NEAR(m.b.to_vector<float>()[1], -0.75 - 0.1 * 2.9 * 2.0, 1e-6);
}

TEST(Optim, WarmupThenCosine) {
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(0, 10, 100, 1.0, 0.1), 0.1);
  EXPECT_DOUBLE_EQ(warmup_cosine_lr(9, 10, 100, 1.0, 0.1), 1.0);
  EXPECT_NEAR(warmup_cosine_lr(55, 10, 100, 1.0, 0.1), 0.55, 1e-12);  // half way: (max + min) / 2
  EXPECT_NEAR(warmup_cosine_lr(100, 10, 100, 1.0, 0.1), 0.1, 1e-12);
}

TEST(Optim, ClipGradNormScalesToTheLimit) {
  Toy m;
  m.w.set_grad(from_vector<float>({3.0f, 0.0f, 0.0f, 0.0f}, {2, 2}));
  m.b.set_grad(from_vector<float>({0.0f, 4.0f}, {2}));
  EXPECT_NEAR(clip_grad_norm(m.parameters(), 1.0), 5.0, 1e-9);
  EXPECT_NEAR(m.b.grad().to_vector<float>()[1], 0.8, 1e-5);
  EXPECT_NEAR(clip_grad_norm(m.parameters(), 0.0), 1.0, 1e-5);  // 0: measure only
}

TEST(Optim, ClipGradNormLeavesGradientsAsTheyAreWhenTheNormIsNotFinite) {
  // An inf (or NaN) norm is returned for the caller to refuse the step; scaling by max_norm / inf would zero the
  // finite gradients and turn the inf ones into NaN.
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float bad : {inf, nan}) {
    Toy m;
    m.w.set_grad(from_vector<float>({3.0f, bad, 0.0f, 0.0f}, {2, 2}));
    m.b.set_grad(from_vector<float>({0.0f, 4.0f}, {2}));
    const double norm = clip_grad_norm(m.parameters(), 1.0);
    EXPECT_FALSE(std::isfinite(norm)) << bad;
    const std::vector<float> w = m.w.grad().to_vector<float>();
    EXPECT_EQ(w[0], 3.0f) << bad;
    EXPECT_TRUE(w[1] == bad || (std::isnan(w[1]) && std::isnan(bad))) << w[1] << " for " << bad;
    EXPECT_EQ(m.b.grad().to_vector<float>(), (std::vector<float>{0.0f, 4.0f})) << bad;
  }
}

TEST(Optim, ClipGradNormReadsEveryDtypeAndStridedGradientsInPlace) {
  // A large gradient (several chunks) in float32, float64 and bfloat16, and a transposed view: the norm is the
  // float64 sum of squares; no float64 copy of a float32 gradient is made.
  Generator gen(3);
  const Tensor g64 = randn({300, 700}, TensorOptions{}.with_dtype(DType::Float64), &gen);
  const double want = std::sqrt(ops::sum(g64 * g64).item<double>());
  for (DType dt : {DType::Float32, DType::Float64, DType::BFloat16}) {
    Tensor p = zeros({300, 700}, TensorOptions{}.with_dtype(dt));
    const Tensor g = g64.to(dt);
    p.set_grad(g);
    const double rounding = dt == DType::BFloat16 ? 1e-2 : dt == DType::Float32 ? 1e-6 : 1e-12;
    EXPECT_NEAR(clip_grad_norm({p}, 0.0), std::sqrt(ops::sum(g.to(DType::Float64) * g.to(DType::Float64)).item<double>()),
                1e-12 * want) << dtype_name(dt);
    EXPECT_NEAR(clip_grad_norm({p}, 0.0), want, rounding * want) << dtype_name(dt);
  }
  Tensor q = zeros({700, 300});
  q.set_grad(g64.to(DType::Float32).mT());
  EXPECT_NEAR(clip_grad_norm({q}, 0.0), want, 1e-6 * want);
  Allocator& cpu = allocator_for(Device::cpu());
  Tensor r = zeros({300, 700});
  r.set_grad(g64.to(DType::Float32));
  cpu.reset_peak();
  const size_t before = cpu.stats().allocated;
  clip_grad_norm({r}, 0.0);
  EXPECT_LT(cpu.stats().peak - before, size_t(4096)) << "clip_grad_norm copied the gradient";
}

TEST(Optim, DecayRuleSkipsVectorsAndEmbeddings) {
  EXPECT_TRUE(decays_by_default("blocks.0.attn.wq.weight", zeros({2, 2})));
  EXPECT_FALSE(decays_by_default("blocks.0.attn_norm.weight", zeros({2})));
  EXPECT_FALSE(decays_by_default("embed.weight", zeros({2, 2})));
}

TEST(ModuleState, StableDottedNamesAndRoundTrip) {
  ModelConfig c = load_model_config("tiny-uoe");
  c.n_layers = 1;
  LanguageModel model(c);
  const auto names = model.named_parameters();
  EXPECT_EQ(names.front().first, "embed.weight");
  EXPECT_EQ(names[1].first, "blocks.0.attn_norm.weight");
  EXPECT_EQ(names.back().first, "final_norm.weight");
  EXPECT_EQ(model.num_parameters(), 256 * 256 + 4 * 256 * 256 + 3 * 8 * 256 * 512 + 3 * 256);
  LanguageModel other(c);
  other.load_state_dict(model.state_dict());
  EXPECT_EQ(other.state_dict().at("blocks.0.ffn.w_up").to_vector<float>(),
            model.state_dict().at("blocks.0.ffn.w_up").to_vector<float>());
  std::map<std::string, Tensor> bad = model.state_dict();
  bad["embed.weight"] = zeros({3, 3});
  EXPECT_THROW(other.load_state_dict(bad), Error);
  bad.erase("embed.weight");
  EXPECT_THROW(other.load_state_dict(bad), Error);
}

}  // namespace
}  // namespace uoe::nn
