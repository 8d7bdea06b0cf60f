// Table-driven finite-difference gradient checks (float64) for every differentiable op,
// on contiguous and strided (non-contiguous) inputs, with broadcasting.
#include <gtest/gtest.h>

#include "core/rng.h"
#include "gradcheck.h"
#include "ops/ops.h"
#include "unary_cases.h"

namespace uoe::testing {
namespace {

using V = std::vector<Tensor>;

Tensor idx(std::vector<int64_t> v, Shape s) { return from_vector(v, s, TensorOptions{}.with_dtype(DType::Int64)); }

std::vector<GradCase> cases() {
  std::vector<GradCase> c = unary_op_cases({3, 5}, true);
  // binary ops with broadcasting in both directions
  c.push_back({"add_broadcast", {{2, 3, 4}, {3, 1}}, [](const V& x) { return x[0] + x[1]; }});
  c.push_back({"sub_broadcast", {{4}, {2, 1, 4}}, [](const V& x) { return x[0] - x[1]; }});
  c.push_back({"mul_broadcast", {{2, 1, 4}, {3, 4}}, [](const V& x) { return x[0] * x[1]; }});
  c.push_back({"div_broadcast", {{2, 3}, {3}}, [](const V& x) { return x[0] / x[1]; }, true});
  c.push_back({"pow_tensor", {{2, 3}, {2, 3}}, [](const V& x) { return ops::pow(x[0], x[1]); }, true});
  c.push_back({"pow_scalar", {{2, 3}}, [](const V& x) { return ops::pow(x[0], 2.5); }, true});
  c.push_back({"scalar_ops", {{3, 2}}, [](const V& x) { return (x[0] * 3.0 - 1.0) / 2.0 + 0.5; }});
  c.push_back({"swiglu", {{3, 5}, {3, 5}}, [](const V& x) { return ops::swiglu(x[0], x[1]); }});
  c.push_back({"where", {{3, 4}, {4}}, [](const V& x) {
                 return ops::where(ops::gt(x[0], ops::scalar_like(0.1, x[0])), x[0], x[1]);
               }});
  // reductions
  c.push_back({"sum_dims_keepdim", {{2, 3, 4}}, [](const V& x) { return ops::sum(x[0], {0, 2}, true); }});
  c.push_back({"sum_all", {{2, 3}}, [](const V& x) { return ops::sum(x[0]); }});
  c.push_back({"mean_dim", {{3, 4}}, [](const V& x) { return ops::mean(x[0], {-1}); }});
  c.push_back({"max_dim", {{3, 5}}, [](const V& x) { return ops::max(x[0], 1); }});
  c.push_back({"min_dim_keepdim", {{4, 3}}, [](const V& x) { return ops::min(x[0], 0, true); }});
  c.push_back({"max_all", {{3, 4}}, [](const V& x) { return ops::max(x[0]); }});
  c.push_back({"min_all", {{3, 4}}, [](const V& x) { return ops::min(x[0]); }});
  c.push_back({"mean_all", {{3, 4}}, [](const V& x) { return ops::mean(x[0]); }});
  // matmul: 2-D, batched with broadcasting, vectors, transposed operands
  c.push_back({"matmul_2d", {{3, 4}, {4, 5}}, [](const V& x) { return ops::matmul(x[0], x[1]); }});
  c.push_back({"matmul_batched_broadcast", {{2, 1, 3, 4}, {3, 4, 2}}, [](const V& x) { return ops::matmul(x[0], x[1]); }});
  c.push_back({"matmul_batch_by_2d", {{2, 3, 4}, {4, 2}}, [](const V& x) { return ops::matmul(x[0], x[1]); }});
  c.push_back({"matmul_vec", {{4}, {4, 3}}, [](const V& x) { return ops::matmul(x[0], x[1]); }});
  c.push_back({"matmul_mat_vec", {{3, 4}, {4}}, [](const V& x) { return ops::matmul(x[0], x[1]); }});
  c.push_back({"matmul_transposed", {{4, 3}, {5, 4}}, [](const V& x) { return ops::matmul(x[0].mT(), x[1].mT()); }});
  // softmax family and losses
  c.push_back({"softmax_last", {{3, 5}}, [](const V& x) { return ops::softmax(x[0], -1); }});
  c.push_back({"softmax_dim0", {{4, 3}}, [](const V& x) { return ops::softmax(x[0], 0); }});
  c.push_back({"log_softmax", {{3, 6}}, [](const V& x) { return ops::log_softmax(x[0], 1); }});
  c.push_back({"cross_entropy_ignore", {{5, 7}}, [](const V& x) {
                 return ops::cross_entropy(x[0], idx({3, -100, 0, 6, 2}, {5}), -100);
               }});
  c.push_back({"cross_entropy_3d", {{2, 3, 4}}, [](const V& x) {
                 return ops::cross_entropy(x[0], idx({0, 1, 2, 3, 3, 1}, {2, 3}));
               }});
  c.push_back({"embedding", {{6, 4}}, [](const V& x) { return ops::embedding(x[0], idx({1, 5, 1, 0}, {2, 2})); }});
  c.push_back({"rms_norm", {{3, 6}, {6}}, [](const V& x) { return ops::rms_norm(x[0], x[1], 1e-6); }});
  c.push_back({"rms_norm_no_weight", {{2, 3, 5}}, [](const V& x) { return ops::rms_norm(x[0], Tensor(), 1e-6); }});
  c.push_back({"layer_norm", {{4, 5}, {5}, {5}}, [](const V& x) { return ops::layer_norm(x[0], x[1], x[2], 1e-5); }});
  c.push_back({"rope", {{2, 3, 2, 6}}, [](const V& x) { return ops::rope(x[0], 10000.0, 2); }});
  // attention: causal, non-causal, grouped-query
  c.push_back({"attention_causal", {{1, 2, 5, 4}, {1, 2, 5, 4}, {1, 2, 5, 4}},
               [](const V& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], true); }});
  c.push_back({"attention_full", {{2, 1, 4, 3}, {2, 1, 4, 3}, {2, 1, 4, 3}},
               [](const V& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], false, 0.7); }});
  c.push_back({"attention_gqa", {{1, 4, 3, 2}, {1, 2, 3, 2}, {1, 2, 3, 2}},
               [](const V& x) { return ops::scaled_dot_product_attention(x[0], x[1], x[2], true); }});
  // indexing
  c.push_back({"gather", {{3, 4}}, [](const V& x) { return ops::gather(x[0], 1, idx({0, 3, 3, 1, 2, 2}, {3, 2})); }});
  c.push_back({"scatter_add", {{3, 4}, {2, 4}}, [](const V& x) {
                 return ops::scatter_add(x[0], 0, idx({2, 0, 0, 2, 1, 1, 2, 2}, {2, 4}), x[1]);
               }});
  c.push_back({"index_select", {{4, 3}}, [](const V& x) { return ops::index_select(x[0], 0, idx({3, 0, 3}, {3})); }});
  c.push_back({"index_add", {{4, 3}, {4, 2}}, [](const V& x) {
                 return ops::index_add(x[0], 1, idx({2, 0}, {2}), x[1]);
               }});
  c.push_back({"topk", {{3, 6}}, [](const V& x) { return ops::topk(x[0], 2, 1).first; }});
  c.push_back({"topk_smallest", {{3, 6}}, [](const V& x) { return ops::topk(x[0], 2, 1, false).first; }});
  // joining, splitting and views
  c.push_back({"cat", {{2, 3}, {2, 2}}, [](const V& x) { return ops::cat({x[0], x[1]}, 1); }});
  c.push_back({"stack", {{2, 3}, {2, 3}}, [](const V& x) { return ops::stack({x[0], x[1]}, 1); }});
  c.push_back({"split", {{5, 2}}, [](const V& x) {
                 auto parts = ops::split(x[0], 2, 0);
                 return parts[0] * parts[1] + parts[2];
               }});
  c.push_back({"views", {{2, 3, 4}}, [](const V& x) {
                 return x[0].permute({2, 0, 1}).reshape({4, 6}).narrow(1, 1, 4).slice(0, 0, 4, 2).unsqueeze(0).squeeze(0);
               }});
  c.push_back({"expand_transpose", {{3, 1}}, [](const V& x) { return x[0].expand({2, 3, 4}).transpose(0, 2) * 1.5; }});
  c.push_back({"select_flatten", {{3, 2, 2}}, [](const V& x) {
                 return ops::cat({x[0].select(1, 1).flatten(), x[0].select(0, -1).flatten()}, 0);
               }});
  c.push_back({"clone_contiguous", {{3, 4}}, [](const V& x) { return x[0].mT().contiguous().clone(); }});
  c.push_back({"dropout", {{4, 5}}, [](const V& x) {
                 Generator g(7);
                 return ops::dropout(x[0], 0.3, true, &g);
               }});
  return c;
}

class GradCheck : public ::testing::TestWithParam<GradCase> {};

TEST_P(GradCheck, Contiguous) { EXPECT_EQ(check_gradients(GetParam(), Layout::Contiguous, 1), ""); }
TEST_P(GradCheck, Strided) { EXPECT_EQ(check_gradients(GetParam(), Layout::Strided, 2), ""); }

INSTANTIATE_TEST_SUITE_P(Ops, GradCheck, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<GradCase>& info) { return info.param.name; });

}  // namespace
}  // namespace uoe::testing
