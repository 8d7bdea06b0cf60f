// Accuracy tests of uoe::cpu::vm float math (vectorised loops) against double std:: references over millions of floats.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "core/simd.h"
#include "ops/cpu/vec_math.h"

namespace {

namespace vm = uoe::cpu::vm;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Every 997th float bit pattern (~4.3M values of both signs: zeros, denormals, normals, inf, NaN) + extremes.
std::vector<float> sweep_points() {
  std::vector<float> xs;
  xs.reserve(4400000);
  for (uint64_t u = 0; u <= 0xffffffffull; u += 997) xs.push_back(std::bit_cast<float>(static_cast<uint32_t>(u)));
  const float extremes[] = {0.0f,     1e-30f,   1e-38f,   1e-40f,   1e-45f,   FLT_MIN,  FLT_TRUE_MIN, 0.5f,
                            1.0f,     2.0f,     10.0f,    20.0f,    87.0f,    88.0f,    88.72f,       88.7228f,
                            88.7229f, 89.0f,    100.0f,   103.9f,   104.0f,   1e10f,    1e30f,        FLT_MAX,
                            kInf,     0.625f,   0.9999f,  1.0001f,  1.17549435e-38f};
  for (float e : extremes) {
    xs.push_back(e);
    xs.push_back(-e);
    xs.push_back(std::nextafter(e, kInf));
    xs.push_back(std::nextafter(-e, -kInf));
  }
  xs.push_back(kNaN);
  xs.push_back(-kNaN);
  return xs;
}
const std::vector<float>& points() {
  static const std::vector<float> p = sweep_points();
  return p;
}

// Applies f to all points inside a `#pragma omp simd` loop (the vectorised code path): once as compiled for the
// baseline ISA (SSE2), once through UOE_SIMD (AVX-512 or AVX2 where the machine has it, or the pinned ISA, as the
// kernels run).
template <class F>
void apply_baseline(F f, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}
template <class F>
UOE_SIMD void apply_dispatched(F f, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

// Checks got against ref(double(x)): NaN <-> NaN, overflow -> same-signed inf, else |got - ref| <= tol(x, ref)
// (+ 1 denormal ulp).
constexpr auto kAll = [](float) { return true; };

template <class F, class R, class Tol, class D = decltype(kAll)>
void check(const char* name, F f, R ref, Tol tol, D domain = kAll) {
  const auto& xs = points();
  const int64_t n = static_cast<int64_t>(xs.size());
  std::vector<float> y0(xs.size()), y1(xs.size());
  apply_baseline(f, xs.data(), y0.data(), n);
  apply_dispatched(f, xs.data(), y1.data(), n);
  for (const auto* ys : {&y0, &y1}) {
    const char* path = ys == &y0 ? "baseline" : "dispatched";
    int64_t bad = 0, checked = 0;
    double worst = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float x = xs[i], y = (*ys)[i];
      if (!domain(x)) continue;
      const double r = ref(static_cast<double>(x));
      ++checked;
      bool ok;
      if (std::isnan(r)) {
        ok = std::isnan(y);
      } else if (std::fabs(r) > FLT_MAX) {
        ok = std::isinf(y) && (y > 0) == (r > 0);
      } else {
        // tol gets a finite x (infinities clamped); one denormal ulp is always allowed (float cannot do better).
        const double xf = std::clamp(static_cast<double>(x), -1e30, 1e30);
        const double err = std::fabs(static_cast<double>(y) - r), t = tol(xf, r) + std::ldexp(1.0, -149);
        ok = err <= t;
        worst = std::max(worst, err / t);
      }
      if (!ok && ++bad <= 5)
        ADD_FAILURE() << name << " [" << path << "](" << x << ") = " << y << ", reference " << r << " (bits 0x"
                      << std::hex << std::bit_cast<uint32_t>(x) << std::dec << ")";
    }
    EXPECT_EQ(bad, 0) << name << " [" << path << "]: " << bad << " of " << checked << " points out of tolerance";
    EXPECT_GT(checked, 2000000);
    std::printf("  %-14s %-10s %lld points, worst error / tolerance = %.3f\n", name, path,
                static_cast<long long>(checked), worst);
  }
}

double ref_sigmoid(double x) { return vm::sigmoid(x); }

TEST(VecMath, Exp) {
  check("exp", [](float x) { return vm::exp(x); }, [](double x) { return std::exp(x); },
        [](double, double r) { return r >= FLT_MIN ? 2e-7 * r : std::ldexp(1.0, -149); });
  EXPECT_EQ(vm::exp(-104.0f), 0.0f);
  EXPECT_EQ(vm::exp(-1000.0f), 0.0f);
  EXPECT_EQ(vm::exp(-kInf), 0.0f);
  EXPECT_EQ(vm::exp(kInf), kInf);
  EXPECT_EQ(vm::exp(88.73f), kInf);
  EXPECT_TRUE(std::isfinite(vm::exp(88.72f)));
  EXPECT_TRUE(std::isnan(vm::exp(kNaN)));
  EXPECT_EQ(vm::exp(0.0f), 1.0f);
  EXPECT_EQ(vm::exp(1e-30f), 1.0f);
  EXPECT_EQ(vm::exp(-1e-40f), 1.0f);
  EXPECT_GT(vm::exp(-103.0f), 0.0f);  // gradual underflow, not flushed
}

TEST(VecMath, ExpFtz) {
  // Domain x <= 88 (and NaN); results below FLT_MIN are flushed to exactly 0.
  check("exp_ftz", [](float x) { return vm::exp_ftz(x); },
        [](double x) { return x < -87.3365479 ? 0.0 : std::exp(x); },
        [](double, double r) { return 2e-7 * r; }, [](float x) { return !(x > 88.0f); });
  EXPECT_EQ(vm::exp_ftz(-kInf), 0.0f);
  EXPECT_EQ(vm::exp_ftz(-88.0f), 0.0f);
  EXPECT_EQ(vm::exp_ftz(-1e30f), 0.0f);
  EXPECT_EQ(vm::exp_ftz(0.0f), 1.0f);
  EXPECT_GE(vm::exp_ftz(-87.33f), FLT_MIN);
  EXPECT_TRUE(std::isnan(vm::exp_ftz(kNaN)));
}

TEST(VecMath, Log) {
  check("log", [](float x) { return vm::log(x); }, [](double x) { return std::log(x); },
        [](double, double r) { return 2e-7 * std::fabs(r); }, [](float x) { return x > 0; });
  EXPECT_EQ(vm::log(1.0f), 0.0f);
  EXPECT_EQ(vm::log(0.0f), -kInf);
  EXPECT_EQ(vm::log(-0.0f), -kInf);
  EXPECT_EQ(vm::log(kInf), kInf);
  EXPECT_TRUE(std::isnan(vm::log(-1.0f)));
  EXPECT_TRUE(std::isnan(vm::log(-kInf)));
  EXPECT_TRUE(std::isnan(vm::log(kNaN)));
  EXPECT_NEAR(vm::log(FLT_TRUE_MIN), std::log(double(FLT_TRUE_MIN)), 1e-5);
}

TEST(VecMath, TanhAndGrad) {
  check("tanh", [](float x) { return vm::tanh(x); }, [](double x) { return std::tanh(x); },
        [](double, double r) { return 3e-7 * std::fabs(r); });
  check("tanh_grad", [](float x) { return vm::tanh_grad(x); },
        [](double x) { return 1.0 / (std::cosh(x) * std::cosh(x)); },
        [](double, double r) { return 5e-7 * std::fabs(r) + 1e-37; });
  EXPECT_EQ(vm::tanh(kInf), 1.0f);
  EXPECT_EQ(vm::tanh(-kInf), -1.0f);
  EXPECT_EQ(vm::tanh_grad(kInf), 0.0f);
  EXPECT_FLOAT_EQ(vm::tanh_grad_from_output(vm::tanh(0.3f)), vm::tanh_grad(0.3f));
}

TEST(VecMath, SigmoidAndGrad) {
  check("sigmoid", [](float x) { return vm::sigmoid(x); }, ref_sigmoid,
        [](double, double r) { return 4e-7 * std::fabs(r) + 1e-37; });
  check("sigmoid_grad", [](float x) { return vm::sigmoid_grad(x); },
        [](double x) { return ref_sigmoid(x) * ref_sigmoid(-x); },
        [](double, double r) { return 5e-7 * std::fabs(r) + 1e-37; });
  EXPECT_EQ(vm::sigmoid(kInf), 1.0f);
  EXPECT_EQ(vm::sigmoid(-kInf), 0.0f);
  EXPECT_NEAR(vm::sigmoid(-80.0f) / std::exp(-80.0), 1.0, 1e-6);  // tail keeps relative accuracy
  EXPECT_FLOAT_EQ(vm::sigmoid_grad_from_output(vm::sigmoid(0.3f)), vm::sigmoid_grad(0.3f));
}

TEST(VecMath, SiluAndGrad) {
  // References: the double overloads (clamped so that +-inf give the limits; checked by finite differences below).
  check("silu", [](float x) { return vm::silu(x); }, [](double x) { return vm::silu(x); },
        [](double, double r) { return 4e-7 * std::fabs(r) + 1e-37; });
  // silu' crosses zero near x = -1.28: absolute tolerance there.
  check("silu_grad", [](float x) { return vm::silu_grad(x); },
        [](double x) { return vm::silu_grad(x); },
        [](double, double r) { return 4e-7 * std::max(std::fabs(r), 1.0); });
  EXPECT_EQ(vm::silu(kInf), kInf);
  EXPECT_EQ(vm::silu(-kInf), 0.0f);
  EXPECT_EQ(vm::silu_grad(kInf), 1.0f);
  EXPECT_EQ(vm::silu_grad(-kInf), 0.0f);
}

// silu_and_grad gives silu's and silu_grad's bits, in a vectorised loop as SwiGLU's backward runs it, over the
// clamps (+-200), the exp's range, zeros, infinities and NaN.
TEST(VecMath, SiluAndGradTogetherGiveTheSameBits) {
  std::vector<float> x = {0.0f, -0.0f, 200.0f, -200.0f, 199.99f, 200.01f, -200.01f, 1e30f, -1e30f, kInf, -kInf, kNaN};
  for (float v = -250.0f; v <= 250.0f; v += 0.0371f) x.push_back(v);
  std::vector<float> y(x.size()), dy(x.size());
#pragma omp simd
  for (size_t i = 0; i < x.size(); ++i) vm::silu_and_grad(x[i], y[i], dy[i]);
  auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_EQ(bits(y[i]), bits(vm::silu(x[i]))) << "silu(" << x[i] << ")";
    ASSERT_EQ(bits(dy[i]), bits(vm::silu_grad(x[i]))) << "silu_grad(" << x[i] << ")";
  }
  double yd = 0, dyd = 0;
  for (double v : {-900.0, -3.5, 0.0, 2.25, 900.0}) {
    vm::silu_and_grad(v, yd, dyd);
    EXPECT_EQ(yd, vm::silu(v));
    EXPECT_EQ(dyd, vm::silu_grad(v));
  }
}

TEST(VecMath, Softplus) {
  // Reference: the double overload (log1p form), itself checked against log(1 + exp(x)) where that is exact enough.
  check("softplus", [](float x) { return vm::softplus(x); }, [](double x) { return vm::softplus(x); },
        [](double, double r) { return 4e-7 * std::fabs(r) + 1e-37; });
  for (double x : {-30.0, -3.0, -0.5, 0.0, 0.5, 3.0, 30.0}) EXPECT_NEAR(vm::softplus(x), std::log(1 + std::exp(x)), 1e-15);
  EXPECT_EQ(vm::softplus(kInf), kInf);
  EXPECT_EQ(vm::softplus(-kInf), 0.0f);
  EXPECT_NEAR(vm::softplus(-60.0f) / std::exp(-60.0), 1.0, 1e-6);  // the tail keeps relative accuracy
}

// v = 2u of the tanh-gelu; float rounding of v costs ~|v| ulps of relative accuracy in the far negative tail.
double gelu_v(double x) { return x * (1.5957691216057308 + 0.07135481627260025 * x * x); }

TEST(VecMath, GeluTanhAndGrad) {
  // Reference straight from PyTorch's formula, 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3))), in double where
  // it is accurate (x > -5); the stable x * sigmoid(2u) form elsewhere.
  auto ref = [](double x) {
    if (x > -5 && std::isfinite(x))
      return 0.5 * x * (1.0 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
    return vm::gelu(x);
  };
  check("gelu", [](float x) { return vm::gelu(x); }, ref,
        [](double x, double r) { return 3e-7 * std::fabs(r) * (1.0 + std::fabs(gelu_v(std::max(x, -20.0)))) + 1e-37; });
  check("gelu_grad", [](float x) { return vm::gelu_grad(x); }, [](double x) { return vm::gelu_grad(x); },
        [](double x, double r) {
          return 3e-7 * std::max(1.0, std::fabs(r) * (1.0 + std::fabs(gelu_v(std::clamp(x, -20.0, 20.0)))));
        });
  EXPECT_EQ(vm::gelu(kInf), kInf);
  EXPECT_EQ(vm::gelu(-kInf), 0.0f);
  EXPECT_EQ(vm::gelu_grad(kInf), 1.0f);
  EXPECT_EQ(vm::gelu_grad(-kInf), 0.0f);
  EXPECT_TRUE(std::isnan(vm::gelu_grad(kNaN)));
}

TEST(VecMath, ErfAndGeluErf) {
  check("erf", [](float x) { return vm::erf(x); }, [](double x) { return std::erf(x); },
        [](double x, double r) { return std::fabs(x) < 1 ? 3e-7 * std::fabs(r) : 1e-7; });
  check("erfc", [](float x) { return vm::erfc(x); }, [](double x) { return std::erfc(x); },
        [](double x, double r) { return 3e-7 * std::fabs(r) * (1.0 + x * x) + 1e-37; });
  check("gelu_erf", [](float x) { return vm::gelu_erf(x); },
        [](double x) { return x < -40 ? 0.0 : (x > 40 ? x : 0.5 * x * std::erfc(-x / std::sqrt(2.0))); },
        [](double x, double r) { return 3e-7 * std::fabs(r) * (1.0 + 0.5 * x * x) + 1e-37; });
  check("gelu_erf_grad", [](float x) { return vm::gelu_erf_grad(x); },
        [](double x) { return vm::gelu_erf_grad(x); },
        [](double x, double r) { return 3e-7 * std::max(1.0, std::fabs(r) * (1.0 + 0.5 * x * x)); });
  EXPECT_EQ(vm::erf(kInf), 1.0f);
  EXPECT_EQ(vm::erf(-kInf), -1.0f);
  EXPECT_EQ(vm::erfc(kInf), 0.0f);
  EXPECT_EQ(vm::erfc(-kInf), 2.0f);
  EXPECT_EQ(vm::gelu_erf(-kInf), 0.0f);
  EXPECT_EQ(vm::gelu_erf(kInf), kInf);
  EXPECT_EQ(vm::gelu_erf_grad(kInf), 1.0f);
  EXPECT_TRUE(std::isnan(vm::gelu_erf(kNaN)));
}

TEST(VecMath, NaNPropagates) {
  for (float x : {kNaN, -kNaN}) {
    EXPECT_TRUE(std::isnan(vm::exp(x)));
    EXPECT_TRUE(std::isnan(vm::exp_ftz(x)));
    EXPECT_TRUE(std::isnan(vm::log(x)));
    EXPECT_TRUE(std::isnan(vm::tanh(x)));
    EXPECT_TRUE(std::isnan(vm::tanh_grad(x)));
    EXPECT_TRUE(std::isnan(vm::sigmoid(x)));
    EXPECT_TRUE(std::isnan(vm::sigmoid_grad(x)));
    EXPECT_TRUE(std::isnan(vm::silu(x)));
    EXPECT_TRUE(std::isnan(vm::silu_grad(x)));
    EXPECT_TRUE(std::isnan(vm::softplus(x)));
    EXPECT_TRUE(std::isnan(vm::gelu(x)));
    EXPECT_TRUE(std::isnan(vm::gelu_grad(x)));
    EXPECT_TRUE(std::isnan(vm::erf(x)));
    EXPECT_TRUE(std::isnan(vm::erfc(x)));
    EXPECT_TRUE(std::isnan(vm::gelu_erf(x)));
    EXPECT_TRUE(std::isnan(vm::gelu_erf_grad(x)));
  }
}

TEST(VecMath, DoubleOverloadsMatchStd) {
  for (double x : {-30.0, -2.5, -0.3, 0.0, 1e-300, 0.7, 3.0, 25.0}) {
    EXPECT_DOUBLE_EQ(vm::exp(x), std::exp(x));
    EXPECT_DOUBLE_EQ(vm::tanh(x), std::tanh(x));
    EXPECT_NEAR(vm::sigmoid(x), 1.0 / (1.0 + std::exp(-x)), 1e-15);
    EXPECT_NEAR(vm::silu_grad(x), (vm::silu(x + 1e-6) - vm::silu(x - 1e-6)) / 2e-6, 1e-8);
    EXPECT_NEAR(vm::gelu_grad(x), (vm::gelu(x + 1e-6) - vm::gelu(x - 1e-6)) / 2e-6, 1e-8);
    EXPECT_NEAR(vm::gelu_erf_grad(x), (vm::gelu_erf(x + 1e-6) - vm::gelu_erf(x - 1e-6)) / 2e-6, 1e-8);
    EXPECT_NEAR(vm::tanh_grad(x), (std::tanh(x + 1e-6) - std::tanh(x - 1e-6)) / 2e-6, 1e-8);
    EXPECT_NEAR(vm::sigmoid_grad(x), (vm::sigmoid(x + 1e-6) - vm::sigmoid(x - 1e-6)) / 2e-6, 1e-8);
    if (x > 0) {
      EXPECT_DOUBLE_EQ(vm::log(x), std::log(x));
    }
  }
}

}  // namespace
