// CPU-vs-CUDA parity for every op, forward and backward, in float32 and bfloat16: one table of cases, each run on
// both devices from the same fresh random inputs and the same random output gradient; outputs and every input
// gradient compared by ‖cuda − cpu‖ / ‖cpu‖ (thresholds from the device method notes: float32 far under 1e-3,
// bf16 operands up to 1e-2). Integer outputs (indices, comparisons) must match exactly. Without a GPU every case
// skips with a clear message.
#include <gtest/gtest.h>

#include <cmath>
#include <ostream>

#include "core/rng.h"
#include "cuda/cuda_api.h"
#include "gradcheck.h"
#include "nn/config.h"
#include "nn/optim.h"
#include "nn/transformer.h"
#include "ops/moe.h"
#include "ops/ops.h"
#include "unary_cases.h"

namespace uoe {
namespace {

using Inputs = std::vector<Tensor>;
// A case runs its fn on whatever device its inputs are on; positive inputs are drawn in [0.75, 1.5).
using ParityCase = testing::GradCase;

// An int64 tensor with `values` on the device of `like`.
Tensor ids(const Tensor& like, const std::vector<int64_t>& values, const Shape& shape) {
  return from_vector(values, shape, TensorOptions{}.with_dtype(DType::Int64)).to(like.device());
}

std::vector<int64_t> cycle(int64_t n, int64_t mod, int64_t step = 7) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = (i * step + 3) % mod;
  return v;
}

// A route for expert_ffn: T tokens, K slots over n experts, some slots empty (-1) when `holes`.
Tensor route_indices(const Tensor& like, int64_t T, int64_t K, int64_t n, bool holes) {
  std::vector<int64_t> v;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < K; ++k) v.push_back(holes && (t + k) % 5 == 4 ? -1 : (t * 3 + k * 5) % n);
  return ids(like, v, {T, K});
}

std::vector<ParityCase> cases() {
  using ops::RouteWeights;
  std::vector<ParityCase> c = testing::unary_op_cases({33, 65}, false);
  c.push_back({"add_broadcast", {{7, 1, 9}, {5, 9}}, [](const Inputs& x) { return x[0] + x[1]; }});
  c.push_back({"sub", {{6, 17}, {6, 17}}, [](const Inputs& x) { return x[0] - x[1]; }});
  c.push_back({"mul_broadcast_row", {{64, 96}, {96}}, [](const Inputs& x) { return x[0] * x[1]; }});
  c.push_back({"div", {{6, 17}, {6, 17}}, [](const Inputs& x) { return x[0] / x[1]; }, true});
  c.push_back({"pow", {{6, 17}, {6, 17}}, [](const Inputs& x) { return ops::pow(x[0], x[1]); }, true});
  c.push_back({"pow_scalar", {{6, 17}}, [](const Inputs& x) { return ops::pow(x[0], 3.0); }});
  c.push_back({"strided_transpose_mul", {{24, 40}, {40, 24}}, [](const Inputs& x) { return x[0] * x[1].mT(); }});
  for (auto [name, f] : std::vector<std::pair<const char*, Tensor (*)(const Tensor&, const Tensor&)>>{
           {"eq", ops::eq}, {"ne", ops::ne}, {"lt", ops::lt}, {"le", ops::le}, {"gt", ops::gt}, {"ge", ops::ge}})
    c.push_back({name, {{9, 13}, {13}}, [f](const Inputs& x) { return f(x[0], x[1]); }, false, false});
  c.push_back({"swiglu", {{33, 70}, {33, 70}}, [](const Inputs& x) { return ops::swiglu(x[0], x[1]); }});
  c.push_back({"swiglu_strided", {{40, 24}, {24, 40}}, [](const Inputs& x) { return ops::swiglu(x[0].mT(), x[1]); }});
  c.push_back({"where", {{9, 13}, {9, 13}}, [](const Inputs& x) { return ops::where(ops::gt(x[0], x[1]), x[0], x[1] * 2.0); }});
  c.push_back({"sum_dims", {{5, 6, 7}}, [](const Inputs& x) { return ops::sum(x[0], {0, 2}); }});
  c.push_back({"sum_all", {{129, 33}}, [](const Inputs& x) { return ops::sum(x[0]); }});
  // down long columns: row chunks whose partial sums are column-summed again, three levels deep on the GPU
  c.push_back({"sum_long_columns", {{70001, 3}}, [](const Inputs& x) { return ops::sum(x[0], {0}); }});
  c.push_back({"mean_keepdim", {{5, 6, 7}}, [](const Inputs& x) { return ops::mean(x[0], {1}, true); }});
  c.push_back({"max_dim", {{12, 31}}, [](const Inputs& x) { return ops::max(x[0], 1); }});
  c.push_back({"min_dim0", {{12, 31}}, [](const Inputs& x) { return ops::min(x[0], 0); }});
  c.push_back({"max_all", {{12, 31}}, [](const Inputs& x) { return ops::max(x[0]); }});
  c.push_back({"max_dim0_4d", {{3, 5, 4, 6}}, [](const Inputs& x) { return ops::max(x[0], 0); }});
  c.push_back({"argmax", {{12, 31}}, [](const Inputs& x) { return ops::argmax(x[0], 1); }, false, false});
  c.push_back({"argmax_dim1_4d", {{3, 5, 4, 6}}, [](const Inputs& x) { return ops::argmax(x[0], 1); }, false, false});
  c.push_back({"matmul", {{37, 45}, {45, 29}}, [](const Inputs& x) { return ops::matmul(x[0], x[1]); }});
  c.push_back({"matmul_batched_broadcast", {{3, 17, 24}, {24, 19}}, [](const Inputs& x) { return ops::matmul(x[0], x[1]); }});
  c.push_back({"matmul_transposed", {{45, 37}, {29, 45}}, [](const Inputs& x) { return ops::matmul(x[0].mT(), x[1].mT()); }});
  c.push_back({"softmax", {{17, 300}}, [](const Inputs& x) { return ops::softmax(x[0], -1); }});
  c.push_back({"softmax_dim0", {{17, 30}}, [](const Inputs& x) { return ops::softmax(x[0], 0); }});
  c.push_back({"log_softmax", {{17, 300}}, [](const Inputs& x) { return ops::log_softmax(x[0], -1); }});
  c.push_back({"cross_entropy", {{24, 257}}, [](const Inputs& x) {
                 std::vector<int64_t> t = cycle(24, 257);
                 t[5] = -100;  // ignored
                 return ops::cross_entropy(x[0], ids(x[0], t, {24}));
               }});
  c.push_back({"embedding", {{50, 16}}, [](const Inputs& x) { return ops::embedding(x[0], ids(x[0], cycle(40, 50), {4, 10})); }});
  c.push_back({"rms_norm", {{33, 96}, {96}}, [](const Inputs& x) { return ops::rms_norm(x[0], x[1], 1e-5); }});
  c.push_back({"layer_norm", {{33, 96}, {96}, {96}}, [](const Inputs& x) { return ops::layer_norm(x[0], x[1], x[2], 1e-5); }});
  c.push_back({"rope", {{2, 9, 3, 16}}, [](const Inputs& x) { return ops::rope(x[0], 10000.0, 2); }});
  c.push_back({"attention_causal", {{2, 4, 70, 64}, {2, 4, 70, 64}, {2, 4, 70, 64}},
               [](const Inputs& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], true); }});
  c.push_back({"attention_gqa_strided", {{2, 37, 4, 32}, {2, 37, 2, 32}, {2, 37, 2, 32}}, [](const Inputs& x) {
                 return ops::scaled_dot_product_attention(x[0].transpose(1, 2), x[1].transpose(1, 2), x[2].transpose(1, 2), true);
               }});
  c.push_back({"attention_noncausal_hd128", {{1, 2, 50, 128}, {1, 2, 50, 128}, {1, 2, 50, 128}},
               [](const Inputs& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], false); }});
  c.push_back({"attention_causal_hd96", {{2, 2, 81, 96}, {2, 2, 81, 96}, {2, 2, 81, 96}},  // 3b-*'s head dim
               [](const Inputs& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], true); }});
  c.push_back({"gather", {{8, 20}}, [](const Inputs& x) { return ops::gather(x[0], 1, ids(x[0], cycle(24, 20), {8, 3})); }});
  c.push_back({"scatter_add", {{8, 20}, {8, 3}},
               [](const Inputs& x) { return ops::scatter_add(x[0], 1, ids(x[0], cycle(24, 20, 1), {8, 3}), x[1]); }});
  c.push_back({"index_select", {{30, 12}}, [](const Inputs& x) { return ops::index_select(x[0], 0, ids(x[0], cycle(17, 30), {17})); }});
  c.push_back({"index_add", {{30, 12}, {17, 12}},
               [](const Inputs& x) { return ops::index_add(x[0], 0, ids(x[0], cycle(17, 30, 2), {17}), x[1]); }});
  c.push_back({"topk_values", {{16, 40}}, [](const Inputs& x) { return ops::topk(x[0], 5, 1).first; }});
  c.push_back({"topk_indices", {{16, 40}}, [](const Inputs& x) { return ops::topk(x[0], 5, 1, false).second; }, false, false});
  c.push_back({"cat_stack", {{4, 5}, {4, 5}}, [](const Inputs& x) { return ops::cat({x[0], ops::sum(ops::stack({x[0], x[1]}, 0), {0})}, 1); }});
  c.push_back({"split", {{10, 6}}, [](const Inputs& x) { return ops::split(x[0], std::vector<int64_t>{3, 7}, 0)[1] * 2.0; }});
  c.push_back({"dropout_eval", {{10, 6}}, [](const Inputs& x) { return ops::dropout(x[0], 0.3, false); }});
  // the device Philox draws the CPU's mask bit for bit from the same generator state
  c.push_back({"dropout_train", {{64, 96}}, [](const Inputs& x) {
                 Generator gen{42};
                 return ops::dropout(x[0], 0.3, true, &gen);
               }});
  c.push_back({"cast_roundtrip", {{10, 6}}, [](const Inputs& x) { return x[0].to(DType::Float16).to(x[0].dtype()) * 3.0; }});
  c.push_back({"permute_contiguous", {{3, 4, 5}}, [](const Inputs& x) { return x[0].permute({2, 0, 1}).contiguous() * 2.0; }});
  // ---- MoE ops
  c.push_back({"topk_route_weights", {{40, 8}}, [](const Inputs& x) { return ops::topk_route(x[0], 2, RouteWeights::TopKSoftmax).weights; }});
  c.push_back({"topk_route_full_softmax", {{40, 8}},
               [](const Inputs& x) { return ops::topk_route(x[0], 3, RouteWeights::FullSoftmax).weights; }});
  c.push_back({"topk_route_indices", {{40, 8}},
               [](const Inputs& x) { return ops::topk_route(x[0], 2, RouteWeights::TopKSoftmax).indices; }, false, false});
  c.push_back({"topp_route", {{40, 8}}, [](const Inputs& x) { return ops::topp_route(x[0] * 3.0, 0.6, 4, RouteWeights::TopKSoftmax).weights; }});
  c.push_back({"group_l2norm", {{40, 8 * 6}}, [](const Inputs& x) { return ops::group_l2norm(x[0], 8); }});
  c.push_back({"group_l2norm_float_norms", {{40, 8 * 6}},
               [](const Inputs& x) { return ops::group_l2norm(x[0], 8, DType::Float32); }});
  c.push_back({"load_balance_loss", {{40, 8}}, [](const Inputs& x) {
                 // uneven counts with holes (even ones make the loss 1 and its gradient 0: nothing to compare)
                 std::vector<int64_t> v;
                 for (int64_t t = 0; t < 40; ++t)
                   for (int64_t k = 0; k < 2; ++k) v.push_back(k == 1 && t % 5 == 4 ? -1 : (t * t + 3 * k) % 8);
                 return ops::load_balance_loss(ops::softmax(x[0], -1), ids(x[0], v, {40, 2}));
               }});
  c.push_back({"router_z_loss", {{40, 8}}, [](const Inputs& x) { return ops::router_z_loss(x[0]); }});
  c.push_back({"expert_ffn", {{45, 16}, {45, 2}, {4, 16, 24}, {4, 16, 24}, {4, 24, 16}}, [](const Inputs& x) {
                 return ops::expert_ffn(x[0], route_indices(x[0], 45, 2, 4, true), x[1], x[2], x[3], x[4], 0, 24);
               }});
  c.push_back({"expert_ffn_neuron_range", {{45, 16}, {45, 2}, {4, 16, 24}, {4, 16, 24}, {4, 24, 16}}, [](const Inputs& x) {
                 return ops::expert_ffn(x[0], route_indices(x[0], 45, 2, 4, false), x[1], x[2], x[3], x[4], 6, 24);
               }});
  c.push_back({"expert_ffn_gate_input", {{45, 16}, {45, 2}, {4, 5, 24}, {4, 16, 24}, {4, 24, 16}, {45, 4, 5}},
               [](const Inputs& x) {
                 return ops::expert_ffn(x[0], route_indices(x[0], 45, 2, 4, false), x[1], x[2], x[3], x[4], 0, 24, x[5]);
               }});
  c.push_back({"expert_ffn_shared_gate_input", {{45, 16}, {45, 2}, {4, 5, 24}, {4, 16, 24}, {4, 24, 16}, {45, 1, 5}},
               [](const Inputs& x) {
                 return ops::expert_ffn(x[0], route_indices(x[0], 45, 2, 4, true), x[1], x[2], x[3], x[4], 0, 24, x[5]);
               }});
  // ---- empty and large cases: zero-size launches, long rows, many experts of which some get no token
  c.push_back({"attention_empty_sequence", {{2, 4, 0, 64}, {2, 4, 0, 64}, {2, 4, 0, 64}},
               [](const Inputs& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], true); }});
  c.push_back({"topk_k0", {{16, 40}}, [](const Inputs& x) { return ops::topk(x[0], 0, 1).first; }});
  c.push_back({"topk_k100_rows_2000", {{4, 2000}}, [](const Inputs& x) { return ops::topk(x[0], 100, 1).first; }});
  c.push_back({"index_select_empty", {{30, 12}}, [](const Inputs& x) { return ops::index_select(x[0], 0, ids(x[0], {}, {0})); }});
  c.push_back({"gather_empty", {{8, 20}}, [](const Inputs& x) { return ops::gather(x[0], 1, ids(x[0], {}, {8, 0})); }});
  c.push_back({"scatter_add_empty", {{8, 20}, {8, 0}},
               [](const Inputs& x) { return ops::scatter_add(x[0], 1, ids(x[0], {}, {8, 0}), x[1]); }});
  c.push_back({"topk_route_no_tokens", {{0, 8}}, [](const Inputs& x) { return ops::topk_route(x[0], 2, RouteWeights::TopKSoftmax).weights; }});
  c.push_back({"expert_ffn_no_tokens", {{0, 16}, {0, 2}, {4, 16, 24}, {4, 16, 24}, {4, 24, 16}}, [](const Inputs& x) {
                 return ops::expert_ffn(x[0], ids(x[0], {}, {0, 2}), x[1], x[2], x[3], x[4], 0, 24);
               }});
  c.push_back({"expert_ffn_64_experts_top8", {{20, 32}, {20, 8}, {64, 32, 48}, {64, 32, 48}, {64, 48, 32}},
               [](const Inputs& x) {  // 3b-uoe's routing shape: most experts get a few tokens, some none
                 return ops::expert_ffn(x[0], route_indices(x[0], 20, 8, 64, true), x[1], x[2], x[3], x[4], 0, 48);
               }});
  return c;
}

struct DtypeCase {
  DType dtype;
  double tolerance;
};
void PrintTo(const DtypeCase& c, std::ostream* os) { *os << dtype_name(c.dtype) << " (tolerance " << c.tolerance << ")"; }

class CudaParity : public ::testing::TestWithParam<std::tuple<ParityCase, DtypeCase>> {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): CPU-vs-CUDA parity skipped";
  }
};

double relative_error(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(Device::cpu()).to(DType::Float64), w = want.to(DType::Float64);
  const double num = ops::sum((g - w) * (g - w)).item<double>(), den = ops::sum(w * w).item<double>();
  return den > 0 ? std::sqrt(num / den) : std::sqrt(num);
}

void expect_close(const Tensor& got, const Tensor& want, double tolerance, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_TRUE(got.is_cuda()) << what;
  if (!is_floating(want.dtype())) {
    EXPECT_EQ(got.to(Device::cpu()).to_vector<int64_t>(), want.to_vector<int64_t>()) << what;
    return;
  }
  const std::vector<double> g = got.to(Device::cpu()).to_vector<double>();
  for (size_t i = 0; i < g.size(); ++i) ASSERT_FALSE(std::isnan(g[i])) << what << ": NaN at " << i << " (unwritten output?)";
  EXPECT_LT(relative_error(got, want), tolerance) << what;
}

TEST_P(CudaParity, ForwardAndBackwardMatchTheCpu) {
  const auto& [c, d] = GetParam();
  uint64_t seed = 1000;
  Inputs cpu, gpu;
  for (const Shape& s : c.shapes) {
    // positive: [0.75, 1.5); else standard normal values, never zeros
    Tensor x = testing::random_double(s, seed++, c.positive);
    if (c.positive) x = x * 0.5 + 0.5;
    x = x.to(d.dtype).detach();
    if (c.differentiable) x.requires_grad_();
    cpu.push_back(x);
    Tensor y = x.detach().to(Device::cuda(0));
    if (c.differentiable) y.requires_grad_();
    gpu.push_back(y);
  }
  const Tensor want = c.fn(cpu), got = c.fn(gpu);
  expect_close(got, want, d.tolerance, c.name + " forward");
  if (!c.differentiable || !want.requires_grad()) return;
  const Tensor grad = testing::random_double(want.shape(), seed++).to(want.dtype());
  want.backward(grad);
  got.backward(grad.to(Device::cuda(0)));
  for (size_t i = 0; i < cpu.size(); ++i) {
    if (!cpu[i].grad().defined()) continue;
    ASSERT_TRUE(gpu[i].grad().defined()) << c.name << ": input " << i << " got no gradient on CUDA";
    expect_close(gpu[i].grad(), cpu[i].grad(), d.tolerance, c.name + " grad of input " + std::to_string(i));
  }
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<ParityCase, DtypeCase>>& info) {
  return std::get<0>(info.param).name + "_" + dtype_name(std::get<1>(info.param).dtype);
}

INSTANTIATE_TEST_SUITE_P(Ops, CudaParity,
                         ::testing::Combine(::testing::ValuesIn(cases()),
                                            ::testing::Values(DtypeCase{DType::Float32, 1e-5},
                                                              DtypeCase{DType::BFloat16, 1e-2})),
                         case_name);

// A whole tiny-uoe training step (forward, backward, gradient clipping, AdamW) on both devices from the same
// weights and batch: the loss and every gradient agree, and so does every weight updated from the same gradients.
class CudaTrainStep : public ::testing::TestWithParam<DtypeCase> {
 protected:
  void SetUp() override {
    if (!cuda::is_available()) GTEST_SKIP() << "no CUDA device visible (CPU-only build or no GPU): training-step parity skipped";
  }
};

// One training step (loss, every gradient, the AdamW update) of `config` on the CPU and on the GPU.
void expect_step_agrees(const nn::ModelConfig& config, const DtypeCase& param) {
  manual_seed(3);
  nn::LanguageModel cpu(config), gpu(config);
  gpu.load_state_dict(cpu.state_dict());
  gpu.to(Device::cuda(0));
  if (param.dtype != DType::Float32) cpu.compute_dtype = gpu.compute_dtype = param.dtype;
  const Tensor ids = randint(0, 256, {4, 128}, TensorOptions{}.with_dtype(DType::Int64));
  const Tensor next = randint(0, 256, {4, 128}, TensorOptions{}.with_dtype(DType::Int64));
  nn::AdamW opt_cpu(cpu.named_parameters(), nn::AdamWOptions{}), opt_gpu(gpu.named_parameters(), nn::AdamWOptions{});
  const Tensor loss_cpu = cpu.loss(ids, next), loss_gpu = gpu.loss(ids.to(Device::cuda(0)), next.to(Device::cuda(0)));
  EXPECT_LT(std::fabs(loss_gpu.item<double>() - loss_cpu.item<double>()) / loss_cpu.item<double>(), param.tolerance);
  loss_cpu.backward();
  loss_gpu.backward();
  const auto params_cpu = cpu.named_parameters(), params_gpu = gpu.named_parameters();
  for (size_t i = 0; i < params_cpu.size(); ++i) {
    expect_close(params_gpu[i].second.grad(), params_cpu[i].second.grad(), 20 * param.tolerance,
                 "grad of " + params_cpu[i].first);
    // The GPU steps from the CPU's gradients: AdamW's first step moves each weight by about lr sign(gradient), so
    // gradients that agree to bfloat16 rounding would move elements near 0 in opposite directions.
    Tensor(params_gpu[i].second).set_grad(params_cpu[i].second.grad().to(Device::cuda(0)));
  }
  nn::clip_grad_norm(cpu.parameters(), 1.0);
  nn::clip_grad_norm(gpu.parameters(), 1.0);
  opt_cpu.step(1e-3);
  opt_gpu.step(1e-3);
  for (size_t i = 0; i < params_cpu.size(); ++i)
    expect_close(params_gpu[i].second, params_cpu[i].second, param.tolerance, "updated " + params_cpu[i].first);
}

TEST_P(CudaTrainStep, TinyUoeStepAgreesOnBothDevices) { expect_step_agrees(nn::load_model_config("tiny-uoe"), GetParam()); }

// 12 routing neurons, as 3b-uoe: the experts' range [12, 512) runs on zero-padded weight copies on the GPU only
// (ops::expert_ffn), which must change nothing.
TEST_P(CudaTrainStep, UnalignedUoeExpertRangeAgreesOnBothDevices) {
  nn::ModelConfig config = nn::load_model_config("tiny-uoe");
  config.ffn.routing_neurons = 12;
  expect_step_agrees(config, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Dtypes, CudaTrainStep,
                         ::testing::Values(DtypeCase{DType::Float32, 1e-4}, DtypeCase{DType::BFloat16, 1e-2}),
                         [](const auto& info) { return std::string(dtype_name(info.param.dtype)); });

}  // namespace
}  // namespace uoe
