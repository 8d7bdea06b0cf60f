// CUDA optimiser kernels against the CPU kernels over several steps, the multi-tensor AdamW against the
// per-tensor one (bit for bit), and nn::AdamW / nn::SGD on CUDA parameters. Skips without a GPU.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/rng.h"
#include "core/tensor.h"
#include "cuda/cuda_api.h"
#include "cuda/stream.h"
#include "gradcheck.h"
#include "nn/optim.h"
#include "ops/kernels/optimizer.h"

namespace uoe {
namespace {

class CudaOptimizer : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CUDA tests skipped";
  }
};

const Device kGpu = Device::cuda(0);

double rel_err(const Tensor& got, const Tensor& want) {
  const std::vector<double> a = got.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  const std::vector<double> b = want.to(Device::cpu()).to(DType::Float64).to_vector<double>();
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::isnan(a[i])) return std::numeric_limits<double>::infinity();
    diff += (a[i] - b[i]) * (a[i] - b[i]);
    norm += b[i] * b[i];
  }
  return std::sqrt(diff / std::max(norm, 1e-300));
}

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> x = a.to(Device::cpu()).to(DType::Float32).to_vector<float>(),
                           y = b.to(Device::cpu()).to(DType::Float32).to_vector<float>();
  return x.size() == y.size() && (x.empty() || std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
}

cpu::AdamWStep adamw_step(int step, float wd) {
  const float b1 = 0.9f, b2 = 0.95f;
  return {1e-2f, b1, b2, 1e-8f, wd, float(1.0 - std::pow(double(b1), step)), float(1.0 - std::pow(double(b2), step))};
}

TEST_F(CudaOptimizer, AdamWMatchesTheCpuKernelOverSteps) {
  Generator gen(11);
  const int64_t n = 100003;
  Tensor p = randn({n}, {}, &gen), m = zeros_like(p), v = zeros_like(p);
  Tensor dp = p.to(kGpu), dm = m.to(kGpu), dv = v.to(kGpu);
  for (int step = 1; step <= 6; ++step) {
    const Tensor g = randn({n}, {}, &gen), dg = g.to(kGpu);
    const cpu::AdamWStep s = adamw_step(step, 0.1f);
    cpu::adamw_update(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(), n, s);
    cuda::adamw_update(dp.data_ptr<float>(), dg.data_ptr<float>(), dm.data_ptr<float>(), dv.data_ptr<float>(), n, s);
    cuda::synchronize(0, "test adamw");
  }
  EXPECT_LT(rel_err(dp, p), 1e-6);
  EXPECT_LT(rel_err(dm, m), 1e-6);
  EXPECT_LT(rel_err(dv, v), 1e-6);
}

TEST_F(CudaOptimizer, SgdMatchesTheCpuKernelOverSteps) {
  Generator gen(12);
  const int64_t n = 77777;
  Tensor p = randn({n}, {}, &gen), vel = zeros_like(p);
  Tensor dp = p.to(kGpu), dvel = vel.to(kGpu);
  for (int step = 1; step <= 6; ++step) {
    const Tensor g = randn({n}, {}, &gen), dg = g.to(kGpu);
    cpu::sgd_update(p.data_ptr<float>(), g.data_ptr<float>(), vel.data_ptr<float>(), n, 0.05f, 0.9f, 0.01f);
    cuda::sgd_update(dp.data_ptr<float>(), dg.data_ptr<float>(), dvel.data_ptr<float>(), n, 0.05f, 0.9f, 0.01f);
    cuda::synchronize(0, "test sgd");
  }
  EXPECT_LT(rel_err(dp, p), 1e-6);
  EXPECT_LT(rel_err(dvel, vel), 1e-6);
}

TEST_F(CudaOptimizer, Bf16ParametersMatchTheCpuKernelOverSteps) {
  // bfloat16 parameters and gradients, float32 state: the GPU's stochastic rounding uses the CPU's noise, so the
  // parameters agree to bfloat16 rounding (an FMA on the CPU can change the last float32 bit, and so the noise).
  Generator gen(14);
  const int64_t n = 50021;
  const TensorOptions bf16 = TensorOptions{}.with_dtype(DType::BFloat16);
  Tensor p = randn({n}, bf16, &gen), m = zeros({n}), v = zeros({n}), vel = zeros({n}), q = p.clone();
  Tensor dp = p.to(kGpu), dm = m.to(kGpu), dv = v.to(kGpu), dq = q.to(kGpu), dvel = vel.to(kGpu);
  for (int step = 1; step <= 6; ++step) {
    const Tensor g = randn({n}, bf16, &gen), dg = g.to(kGpu);
    const cpu::AdamWStep s = adamw_step(step, 0.1f);
    const cpu::RoundingKey key{uint32_t(step), 1000};
    cpu::adamw_update(p.data_ptr<BFloat16>(), g.data_ptr<BFloat16>(), m.data_ptr<float>(), v.data_ptr<float>(), n, s,
                      key);
    cuda::adamw_update(dp.data_ptr<BFloat16>(), dg.data_ptr<BFloat16>(), dm.data_ptr<float>(), dv.data_ptr<float>(),
                       n, s, key);
    cpu::sgd_update(q.data_ptr<BFloat16>(), g.data_ptr<BFloat16>(), vel.data_ptr<float>(), n, 0.05f, 0.9f, 0.01f, key);
    cuda::sgd_update(dq.data_ptr<BFloat16>(), dg.data_ptr<BFloat16>(), dvel.data_ptr<float>(), n, 0.05f, 0.9f, 0.01f,
                     key);
    cuda::synchronize(0, "test bf16 optimizers");
  }
  EXPECT_LT(rel_err(dp.to(DType::Float32), p.to(DType::Float32)), 1e-2);
  EXPECT_LT(rel_err(dm, m), 1e-5);
  EXPECT_LT(rel_err(dq.to(DType::Float32), q.to(DType::Float32)), 1e-2);
  // SGD's velocity takes the weight decay of parameters that agree to bfloat16 rounding: 0.01 x 1e-2
  EXPECT_LT(rel_err(dvel, vel), 1e-4);
}

// cpu::squared_norm and cuda::squared_norm (into a device double, read back here).
double cpu_squared_norm(const Tensor& g) {
  double out = -1;
  if (g.dtype() == DType::Float64) cpu::squared_norm(g.data_ptr<double>(), g.numel(), &out);
  else if (g.dtype() == DType::Float32) cpu::squared_norm(g.data_ptr<float>(), g.numel(), &out);
  else cpu::squared_norm(g.data_ptr<BFloat16>(), g.numel(), &out);
  return out;
}
double gpu_squared_norm(const Tensor& g) {
  Tensor out = full({1}, std::numeric_limits<double>::quiet_NaN(),
                    TensorOptions{}.with_dtype(DType::Float64).with_device(kGpu));  // poisoned
  if (g.dtype() == DType::Float64) cuda::squared_norm(g.data_ptr<double>(), g.numel(), out.data_ptr<double>());
  else if (g.dtype() == DType::Float32) cuda::squared_norm(g.data_ptr<float>(), g.numel(), out.data_ptr<double>());
  else cuda::squared_norm(g.data_ptr<BFloat16>(), g.numel(), out.data_ptr<double>());
  return out.item<double>();
}

TEST_F(CudaOptimizer, SquaredNormMatchesTheCpuForEveryDtype) {
  Generator gen(15);
  for (int64_t n : {int64_t(0), int64_t(1), int64_t(1000), int64_t(3) * 65536 + 77}) {
    const Tensor g = randn({n}, TensorOptions{}.with_dtype(DType::Float64), &gen);
    const Tensor f = g.to(DType::Float32), b = g.to(DType::BFloat16);
    const double want = cpu_squared_norm(g);
    EXPECT_NEAR(gpu_squared_norm(g.to(kGpu)), want, 1e-12 * want) << n;
    EXPECT_NEAR(gpu_squared_norm(f.to(kGpu)), cpu_squared_norm(f), 1e-12 * want) << n;
    EXPECT_NEAR(gpu_squared_norm(b.to(kGpu)), cpu_squared_norm(b), 1e-12 * want) << n;
    EXPECT_EQ(gpu_squared_norm(f.to(kGpu)), gpu_squared_norm(f.to(kGpu))) << "not repeatable at n = " << n;
  }
}

TEST_F(CudaOptimizer, MultiTensorAdamWEqualsPerTensorBitForBit) {
  Generator gen(13);
  // More tensors than one launch holds (32), tensors spanning several chunks, one spanning more chunks than one
  // launch holds (320 x 64 Ki), and an empty one.
  std::vector<int64_t> sizes = {1, 3, 1000, 65536, 65537, 300001, 0, int64_t(320) * 65536 + 12345};
  for (int i = 0; i < 40; ++i) sizes.push_back(1 + (i * 7919) % 5000);
  struct Param { Tensor p, m, v, p2, m2, v2; float wd; };
  std::vector<Param> params;
  for (size_t i = 0; i < sizes.size(); ++i) {
    // every third parameter in bfloat16 (the launch mixes storage types)
    const Tensor p = randn({sizes[i]}, {}, &gen).to(i % 3 == 1 ? DType::BFloat16 : DType::Float32).to(kGpu);
    const Tensor m = randn({sizes[i]}, {}, &gen).mul_(0.1).to(kGpu);
    const Tensor v = rand({sizes[i]}, {}, &gen).mul_(0.01).to(kGpu);
    params.push_back({p, m, v, p.clone(), m.clone(), v.clone(), i % 2 ? 0.1f : 0.0f});
  }
  for (int step = 1; step <= 3; ++step) {
    std::vector<Tensor> grads;
    std::vector<cuda::AdamWTensor> multi;
    for (size_t i = 0; i < params.size(); ++i) {
      Param& q = params[i];
      grads.push_back(randn(q.p.shape(), {}, &gen).to(q.p.dtype()).to(kGpu));
      const Tensor& g = grads.back();
      const cpu::AdamWStep s = adamw_step(step, q.wd);
      const bool bf16 = q.p.dtype() == DType::BFloat16;
      const cpu::RoundingKey key{uint32_t(step), int64_t(i) * 3};
      if (bf16)
        cuda::adamw_update(q.p.data_ptr<BFloat16>(), g.data_ptr<BFloat16>(), q.m.data_ptr<float>(),
                           q.v.data_ptr<float>(), q.p.numel(), s, key);
      else
        cuda::adamw_update(q.p.data_ptr<float>(), g.data_ptr<float>(), q.m.data_ptr<float>(), q.v.data_ptr<float>(),
                           q.p.numel(), s);
      multi.push_back({q.p2.raw_data(), g.raw_data(), bf16, q.m2.data_ptr<float>(), q.v2.data_ptr<float>(),
                       q.p2.numel(), q.wd, key});
    }
    cuda::adamw_update_multi(multi, adamw_step(step, 12345.0f));  // the step's own weight decay is ignored
    cuda::synchronize(0, "test adamw multi");
  }
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(same_bits(params[i].p2, params[i].p)) << "tensor " << i << " of " << sizes[i];
    EXPECT_TRUE(same_bits(params[i].m2, params[i].m)) << "tensor " << i;
    EXPECT_TRUE(same_bits(params[i].v2, params[i].v)) << "tensor " << i;
  }
}

// A matrix (decayed), a vector (not decayed) and an embedding (not decayed), on `device`.
nn::NamedTensors toy_params(Device device) {
  Generator gen(21);
  return {{"w", randn({64, 33}, {}, &gen).to(device)},
          {"b", randn({33}, {}, &gen).to(device)},
          {"embed.weight", randn({100, 16}, {}, &gen).to(device)}};
}

template <typename Opt, typename... Args>
void check_optimizer_parity(Args... args) {
  nn::NamedTensors cpu_params = toy_params(Device::cpu()), gpu_params = toy_params(kGpu);
  Opt cpu_opt(cpu_params, args...), gpu_opt(gpu_params, args...);
  Generator gen(22);
  for (int step = 0; step < 5; ++step) {
    for (size_t i = 0; i < cpu_params.size(); ++i) {
      const Tensor g = randn(cpu_params[i].second.shape(), {}, &gen);
      cpu_params[i].second.set_grad(g);
      gpu_params[i].second.set_grad(g.to(kGpu));
    }
    cpu_opt.step(1e-2);
    gpu_opt.step(1e-2);
  }
  cuda::synchronize(0, "test optimizer");
  for (size_t i = 0; i < cpu_params.size(); ++i)
    EXPECT_LT(rel_err(gpu_params[i].second, cpu_params[i].second), 1e-6) << cpu_params[i].first;
  const nn::NamedTensors cs = cpu_opt.state(), gs = gpu_opt.state();
  ASSERT_EQ(cs.size(), gs.size());
  for (size_t i = 0; i < cs.size(); ++i) {
    EXPECT_EQ(cs[i].first, gs[i].first);
    if (cs[i].first == "step") continue;
    EXPECT_TRUE(gs[i].second.is_cuda()) << gs[i].first;
    EXPECT_LT(rel_err(gs[i].second, cs[i].second), 1e-6) << cs[i].first;
  }
}

TEST_F(CudaOptimizer, AdamWOnCudaParametersMatchesCpu) {
  check_optimizer_parity<nn::AdamW>(nn::AdamWOptions{0.9, 0.95, 1e-8, 0.1});
}

TEST_F(CudaOptimizer, SgdOnCudaParametersMatchesCpu) { check_optimizer_parity<nn::SGD>(0.9, 0.01); }

TEST_F(CudaOptimizer, GradientOnAnotherDeviceIsRefused) {
  nn::NamedTensors params = toy_params(kGpu);
  const std::string msg =
      uoe::testing::error_of([&] { params[0].second.set_grad(zeros_like(params[0].second).to(Device::cpu())); });
  EXPECT_NE(msg.find("[set_grad]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("expected the same shape, dtype and device"), std::string::npos) << msg;
}

}  // namespace
}  // namespace uoe
