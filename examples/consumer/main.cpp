#include <iostream>

#include "ops/ops.h"

int main() {
  using namespace uoe;
  Tensor x = randn({32, 64});
  Tensor w = randn({64, 10}).requires_grad_();
  Tensor loss = ops::cross_entropy(ops::matmul(x, w), randint(0, 10, {32}));
  loss.backward();                // w.grad() is [64, 10]
  std::cout << w.grad() << "\n";  // tensor([[...]], shape=[64, 10], dtype=float32)
}
