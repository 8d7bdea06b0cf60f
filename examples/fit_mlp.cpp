// fit_mlp: the demo main job until the language-model trainer lands. Fits a two-layer GELU MLP
// to y = tanh(3 x0) x1² + x0 / 2 with SGD + momentum and prints the loss as it falls.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <vector>

#include "autograd/grad_mode.h"
#include "core/rng.h"
#include "ops/ops.h"

using namespace uoe;

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  const int steps = quick ? 60 : 600;
  const int64_t batch = 256, hidden = 128;
  manual_seed(0);
  try {
    // Parameters: x [B, 2] -> h [B, hidden] -> y [B, 1]
    Tensor w1 = (randn({2, hidden}) * 1.0).detach().requires_grad_();
    Tensor b1 = zeros({hidden}, TensorOptions{}.with_requires_grad());
    Tensor w2 = (randn({hidden, 1}) * (1.0 / std::sqrt(double(hidden)))).detach().requires_grad_();
    Tensor b2 = zeros({1}, TensorOptions{}.with_requires_grad());
    std::vector<Tensor> params = {w1, b1, w2, b2};
    std::vector<Tensor> velocity;
    for (const Tensor& p : params) velocity.push_back(zeros_like(p));
    const double lr = 0.05, momentum = 0.9;

    const auto t0 = std::chrono::steady_clock::now();
    double first = 0, last = 0;
    for (int step = 1; step <= steps; ++step) {
      const Tensor x = rand({batch, 2}) * 2.0 - 1.0;                             // [B, 2] in [-1, 1)
      const Tensor x0 = x.select(1, 0), x1 = x.select(1, 1);                     // [B]
      const Tensor target = (ops::tanh(x0 * 3.0) * x1 * x1 + x0 * 0.5).unsqueeze(1);  // [B, 1]
      const Tensor h = ops::gelu(ops::matmul(x, w1) + b1);                       // [B, hidden]
      const Tensor y = ops::matmul(h, w2) + b2;                                  // [B, 1]
      const Tensor loss = ops::mean(ops::pow(y - target, 2.0));
      for (Tensor& p : params) p.set_grad(Tensor());
      loss.backward();
      {
        NoGradGuard no_grad;
        for (size_t i = 0; i < params.size(); ++i) {
          velocity[i].mul_(momentum).add_(params[i].grad());
          params[i].add_(velocity[i], -lr);
        }
      }
      last = loss.item<double>();
      if (step == 1) first = last;
      if (step == 1 || step % (steps / 10) == 0) std::printf("step %4d  loss %.5f\n", step, last);
    }
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("loss %.5f -> %.5f in %d steps (%.2f s)\n", first, last, steps, secs);
    if (!(last < first)) {
      std::fprintf(stderr, "fit_mlp: the loss did not fall\n");
      return 1;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fit_mlp: %s\n", e.what());
    return 1;
  }
  return 0;
}
