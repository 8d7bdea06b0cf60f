// Bad input gets one clear error naming the op and the shapes, never a crash.
#include <gtest/gtest.h>

#include "core/error.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe {
namespace {

using testing::error_of;


using testing::expect_error;

const TensorOptions kI64 = TensorOptions{}.with_dtype(DType::Int64);

TEST(BadInput, ShapesThatDoNotBroadcast) {
  expect_error([] { zeros({2, 3}) + zeros({4}); }, {"[add]", "[2, 3]", "[4]"});
  expect_error([] { ops::where(zeros({2}, TensorOptions{}.with_dtype(DType::Bool)), zeros({3}), zeros({3})); },
               {"[where]"});
}

TEST(BadInput, MatmulInnerDims) {
  expect_error([] { ops::matmul(zeros({2, 3}), zeros({4, 5})); },
               {"[matmul] a is [2, 3] and b is [4, 5]", "must equal b's dim -2 (4)"});
  expect_error([] { ops::matmul(zeros({2, 3, 4}), zeros({3, 4, 5})); }, {"[matmul]", "broadcast"});
  expect_error([] { ops::matmul(zeros({}), zeros({2})); }, {"[matmul]", "at least 1 dim"});
}

TEST(BadInput, MismatchedDtypes) {
  expect_error([] { zeros({2}) * zeros({2}, TensorOptions{}.with_dtype(DType::Float64)); }, {"[mul]", "float32", "float64"});
  expect_error([] { ops::exp(zeros({2}, kI64)); }, {"[exp]", "int64"});
  expect_error([] { ops::matmul(zeros({2, 2}), zeros({2, 2}, TensorOptions{}.with_dtype(DType::Float64))); },
               {"[matmul]", "dtypes differ"});
  expect_error([] { zeros({2}, kI64).requires_grad_(); }, {"[requires_grad_]", "floating"});
}

TEST(BadInput, MismatchedDevicesOrMissingCuda) {
  const std::string msg = error_of([] { ops::add(zeros({2}), zeros({2}).to(Device::cuda(0))); });
  EXPECT_FALSE(msg.empty());
}

TEST(BadInput, OutOfRangeIndices) {
  expect_error([] { ops::embedding(zeros({4, 3}), from_vector<int64_t>({1, 4}, {2})); },
               {"[index_select]", "index 4", "size 4"});
  expect_error([] { ops::gather(zeros({2, 3}), 1, from_vector<int64_t>({0, 3}, {2, 1})); }, {"[gather]", "index 3"});
  expect_error([] { ops::index_select(zeros({2, 3}), 0, from_vector<int64_t>({-1}, {1})); }, {"[index_select]", "-1"});
  expect_error([] { ops::cross_entropy(zeros({2, 5}), from_vector<int64_t>({1, 9}, {2})); },
               {"[cross_entropy] target 9", "5 classes"});
  expect_error([] { ops::topk(zeros({2, 3}), 4, 1); }, {"[topk]", "k = 4"});
  expect_error([] { zeros({2, 3}).narrow(1, 2, 2); }, {"[narrow]", "out of bounds"});
  expect_error([] { zeros({2, 3}).transpose(0, 2); }, {"[transpose]", "dim 2"});
  expect_error([] { zeros({2, 3}).select(0, 2); }, {"[select]", "out of range"});
}

TEST(BadInput, ShapeErrorsOfNnOps) {
  expect_error([] { ops::rms_norm(zeros({2, 4}), zeros({3})); }, {"[rms_norm]", "[2, 4]", "[4]", "[3]"});
  expect_error([] { ops::layer_norm(zeros({2, 4}), zeros({4}), zeros({5})); }, {"[layer_norm]"});
  expect_error([] { ops::rope(zeros({2, 3, 4, 5})); }, {"[rope]", "even Dh"});
  expect_error([] { ops::scaled_dot_product_attention(zeros({1, 2, 4, 8}), zeros({1, 3, 4, 8}), zeros({1, 3, 4, 8})); },
               {"[scaled_dot_product_attention]", "H divisible by Hkv"});
  expect_error([] { ops::cross_entropy(zeros({2, 5}), zeros({3}, kI64)); }, {"[cross_entropy]", "must be [2]"});
  expect_error([] { ops::cat({zeros({2, 3}), zeros({3, 3})}, 1); }, {"[cat]", "[3, 3]"});
  expect_error([] { ops::split(zeros({5}), std::vector<int64_t>{2, 2}, 0); }, {"[split]", "sum to 4"});
  expect_error([] { zeros({2, 3}).view({4, -1}); }, {"[view]", "[4, -1]"});
  expect_error([] { zeros({2, 3}).expand({3, 3}); }, {"[expand]"});
  expect_error([] { ops::dropout(zeros({2}), 1.5); }, {"[dropout]", "1.5"});
}

TEST(BadInput, EmptyTensorsAreHandled) {
  EXPECT_EQ(ops::matmul(zeros({0, 3}), zeros({3, 4})).shape(), (Shape{0, 4}));
  EXPECT_EQ(ops::matmul(zeros({2, 0}), zeros({0, 4})).to_vector<float>(), std::vector<float>(8, 0.0f));
  EXPECT_EQ(ops::sum(zeros({0, 3}), {0}).to_vector<float>(), std::vector<float>(3, 0.0f));
  EXPECT_EQ(ops::softmax(zeros({0, 3})).numel(), 0);
  EXPECT_EQ((zeros({0}) + 1.0).numel(), 0);
  expect_error([] { ops::max(zeros({0, 3}), 0); }, {"[max]", "empty"});
  expect_error([] { ops::cat({}, 0); }, {"[cat]"});
}

}  // namespace
}  // namespace uoe
