// Autograd engine: diamonds, accumulation, hooks, retain_grad, no_grad, detach, in-place
// errors, second backward, anomaly mode naming the op, DOT dump.
#include <gtest/gtest.h>

#include <pthread.h>

#include <cmath>
#include <functional>

#include "autograd/graph_dump.h"
#include "autograd/grad_mode.h"
#include "core/error.h"
#include "gradcheck.h"
#include "ops/ops.h"

namespace uoe {
namespace {

using testing::error_of;

Tensor leaf(std::vector<double> v, Shape s) {
  return from_vector(v, s, TensorOptions{}.with_dtype(DType::Float64)).requires_grad_();
}


TEST(AutogradEngine, DiamondGraphSumsBothPaths) {
  // y = a*b + exp(a)  with b = a*3:  dy/da = 6a + exp(a)
  Tensor a = leaf({0.5, -1.0}, {2});
  Tensor b = a * 3.0;
  Tensor y = ops::sum(a * b + ops::exp(a));
  y.backward();
  const auto g = a.grad().to_vector<double>();
  EXPECT_NEAR(g[0], 6 * 0.5 + std::exp(0.5), 1e-12);
  EXPECT_NEAR(g[1], -6.0 + std::exp(-1.0), 1e-12);
}

TEST(AutogradEngine, GradientsAccumulateAcrossCalls) {
  Tensor a = leaf({1.0, 2.0}, {2});
  ops::sum(a * a).backward();
  ops::sum(a * a).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{4.0, 8.0}));
}

TEST(AutogradEngine, ExplicitGradientForNonScalar) {
  Tensor a = leaf({1.0, 2.0, 3.0}, {3});
  Tensor y = a * 2.0;
  y.backward(from_vector<double>({1.0, 0.5, -1.0}, {3}, TensorOptions{}.with_dtype(DType::Float64)));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{2.0, 1.0, -2.0}));
  Tensor z = a * 2.0;
  EXPECT_NE(error_of([&] { z.backward(); }).find("only for a scalar"), std::string::npos);
}

TEST(AutogradEngine, HooksSeeAndReplaceGradients) {
  Tensor a = leaf({1.0, 2.0}, {2});
  Tensor h = a * 3.0;
  std::vector<double> seen;
  h.register_hook([&](const Tensor& g) {
    seen = g.to_vector<double>();
    return g * 10.0;  // replaces the gradient flowing on
  });
  h.retain_grad();
  ops::sum(h * h).backward();
  EXPECT_EQ(seen, (std::vector<double>{6.0, 12.0}));           // d/dh sum(h^2) = 2h
  EXPECT_EQ(h.grad().to_vector<double>(), (std::vector<double>{60.0, 120.0}));
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{180.0, 360.0}));
  // Leaf hooks run before accumulation.
  Tensor b = leaf({1.0}, {1});
  b.register_hook([](const Tensor& g) { return g * 0.5; });
  ops::sum(b * 4.0).backward();
  EXPECT_EQ(b.grad().item<double>(), 2.0);
}

// A slice's gradient adds only its region into the running sum of its input's gradient when the engine alone holds
// that sum (UoE's routing slices of the expert weights); whichever of the two paths arrives first, in float64 and
// bfloat16, the gradient is the sum of both; a sum that a hook kept is left as the hook saw it.
TEST(AutogradEngine, SliceGradientsAddIntoTheRunningSum) {
  for (DType dt : {DType::Float64, DType::BFloat16}) {
    for (bool slice_first : {true, false}) {
      Tensor a = leaf({1, 2, 3, 4, 5, 6, 7, 8}, {2, 4});
      Tensor x = a.to(dt);  // one node whose input gradient both paths sum into
      Tensor part, whole;
      if (slice_first) part = x.narrow(1, 1, 2), whole = x * 3.0;  // the slice's gradient arrives last: in place
      else whole = x * 3.0, part = x.narrow(1, 1, 2);              // the slice's arrives first: zeros around it
      ops::sum(ops::sum(part * part) + ops::sum(whole)).backward();
      // 3 everywhere, + 2x on columns 1 and 2
      EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{3, 7, 9, 3, 3, 15, 17, 3})) << dtype_name(dt);
    }
  }
  // x's running sum is a view of the gradient a hook kept (reshape passes it on): the slice must not write into it
  Tensor a = leaf({1, 2, 3, 4}, {4});
  Tensor x = a * 1.0;
  Tensor part = x.narrow(0, 0, 2), whole = x.reshape({2, 2});
  Tensor kept;
  whole.register_hook([&](const Tensor& g) {
    kept = g;
    return Tensor();
  });
  ops::sum(ops::sum(part) + ops::sum(whole * 3.0)).backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{4, 4, 3, 3}));
  EXPECT_EQ(kept.to_vector<double>(), (std::vector<double>{3, 3, 3, 3}));
}

TEST(AutogradEngine, NoGradAndDetachRecordNothing) {
  Tensor a = leaf({1.0}, {1});
  {
    NoGradGuard guard;
    Tensor y = a * 2.0;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_FALSE(autograd::grad_enabled());
  }
  EXPECT_TRUE(autograd::grad_enabled());
  Tensor d = (a * 2.0).detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  Tensor y = a * 2.0 + d;  // d is a constant
  y.backward();
  EXPECT_EQ(a.grad().item<double>(), 2.0);
}

TEST(AutogradEngine, InPlaceChangeOfSavedTensorRaises) {
  Tensor x = from_vector<double>({1.0, 2.0}, {2}, TensorOptions{}.with_dtype(DType::Float64));
  Tensor w = leaf({3.0, 4.0}, {2});
  Tensor y = ops::sum(x * w);  // mul saves x
  x.add_(ops::scalar_like(1.0, x));
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_NE(msg.find("[backward] mul"), std::string::npos) << msg;
  EXPECT_NE(msg.find("modified by an in-place operation"), std::string::npos) << msg;
}

TEST(AutogradEngine, GradientsOfAnotherDtypeAreRefusedByName) {
  Tensor w = leaf({1.0, 2.0}, {2});
  Tensor y = w * 3.0;
  const Tensor g32 = ones({2});  // float32 for a float64 output
  const std::string msg = error_of([&] { y.backward(g32); });
  EXPECT_NE(msg.find("[backward] the gradient float32[2] on cpu does not match the output float64[2] on cpu"),
            std::string::npos) << msg;
  const std::string set = error_of([&] { w.set_grad(ones({2}, TensorOptions{}.with_dtype(DType::Int32))); });
  EXPECT_NE(set.find("[set_grad] a gradient int32[2] on cpu for a tensor float64[2] on cpu"), std::string::npos) << set;
}

TEST(AutogradEngine, InPlaceOnTensorThatRequiresGradRaises) {
  Tensor w = leaf({1.0}, {1});
  EXPECT_NE(error_of([&] { w.mul_(2.0); }).find("[mul_]"), std::string::npos);
  NoGradGuard guard;
  w.mul_(2.0);  // fine: optimiser-style update
  EXPECT_EQ(w.item<double>(), 2.0);
}

TEST(AutogradEngine, SecondBackwardNeedsRetainGraph) {
  Tensor a = leaf({2.0}, {1});
  Tensor y = ops::sum(ops::exp(a));
  y.backward({}, true);
  y.backward();  // the graph was retained once
  EXPECT_NEAR(a.grad().item<double>(), 2 * std::exp(2.0), 1e-12);
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_NE(msg.find("second time"), std::string::npos) << msg;
}

TEST(AutogradEngine, AnomalyModeNamesTheOp) {
  Tensor a = leaf({0.0, 1.0}, {2});
  Tensor y = ops::sum(ops::sqrt(a));  // d sqrt at 0 is inf
  AnomalyGuard anomaly;
  const std::string msg = error_of([&] { y.backward(); });
  EXPECT_NE(msg.find("[anomaly]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'sqrt'"), std::string::npos) << msg;
}

TEST(AutogradEngine, NonLeafWithoutGradFnCannotBackward) {
  Tensor a = from_vector<double>({1.0}, {1}, TensorOptions{}.with_dtype(DType::Float64));
  EXPECT_NE(error_of([&] { a.backward(); }).find("does not require grad"), std::string::npos);
}

// Runs f on a thread with a 1 MiB stack, whatever the process's stack limit: there destroying a graph recursively,
// node by node, overflowed between 10,000 and 20,000 nodes (an 8 MiB main stack at about 120,000).
void on_small_stack(const std::function<void()>& f) {
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, size_t(1) << 20);
  pthread_t thread;
  auto run = [](void* fn) -> void* {
    (*static_cast<const std::function<void()>*>(fn))();
    return nullptr;
  };
  ASSERT_EQ(pthread_create(&thread, &attr, run, const_cast<std::function<void()>*>(&f)), 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
}

TEST(AutogradEngine, DeepChainDoesNotOverflowTheStack) {
  // Backward and the graph's destruction are both iterative, with or without a backward first
  constexpr int kOps = 50000;
  on_small_stack([] {
    for (bool backward : {true, false}) {
      Tensor a = leaf({1.0}, {1});
      Tensor y = a;
      for (int i = 0; i < kOps; ++i) y = y * 1.0;
      if (backward) {
        y.backward();
        EXPECT_EQ(a.grad().item<double>(), 1.0);
      }
      y = Tensor();  // the last reference to the graph
    }
    Tensor y = leaf({1.0}, {1});
    for (int i = 0; i < kOps; ++i) y = y + y;  // every node has the same input on both edges
    y = Tensor();
  });
}

TEST(AutogradEngine, DotDumpShowsOpsAndShapes) {
  Tensor a = leaf({1.0, 2.0, 3.0, 4.0}, {2, 2});
  Tensor y = ops::sum(ops::matmul(a, a) + 1.0);
  const std::string dot = autograd::to_dot(y);
  EXPECT_NE(dot.find("digraph"), std::string::npos);
  EXPECT_NE(dot.find("matmul"), std::string::npos);
  EXPECT_NE(dot.find("[2, 2]"), std::string::npos);
  EXPECT_NE(dot.find("leaf"), std::string::npos);
  EXPECT_NE(dot.find("->"), std::string::npos);
}

}  // namespace
}  // namespace uoe
