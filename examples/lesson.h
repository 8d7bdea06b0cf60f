// What the teaching programs of examples/ share: printing a tensor or a section title, checking a printed claim by
// recomputation, readable weights, and the configuration of one expert layer.
#pragma once
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <string>

#include "autograd/grad_mode.h"
#include "core/error.h"
#include "core/rng.h"
#include "nn/config.h"
#include "nn/module.h"
#include "ops/ops.h"

namespace uoe::lesson {

inline void show(const std::string& what, const Tensor& t) { std::cout << "\n" << what << "\n" << t << "\n"; }
inline void title(const char* text) { std::printf("\n==== %s ====\n", text); }

inline double max_abs_diff(const Tensor& a, const Tensor& b) { return ops::max(ops::abs(a - b)).item<double>(); }

// Fails loudly unless the claim `what` (lhs = rhs) holds to `tol` (default: float32 rounding); prints it.
inline void check_same(const Tensor& lhs, const Tensor& rhs, const char* what, double tol = 1e-5) {
  const double diff = max_abs_diff(lhs, rhs);
  UOE_CHECK(diff < tol, "claim '", what, "' is false: the two sides differ by ", diff);
  std::printf("check: %s   (max |diff| %.1e)\n", what, diff);
}
// The same claim to float64 rounding.
inline void check_exact(const Tensor& lhs, const Tensor& rhs, const char* what) { check_same(lhs, rhs, what, 1e-12); }

// Redraws every parameter from N(0, 0.5²) so the printed numbers are readable (the library's init is 0.02).
inline void readable_init(nn::Module& m) {
  NoGradGuard no_grad;
  for (auto& [name, p] : m.named_parameters()) p.copy_(randn(p.shape()) * 0.5);
}

// One FFN layer of `kind` on tokens of width d: n experts of D neurons, K chosen per token.
inline nn::ModelConfig expert_layer(nn::FfnKind kind, int64_t d, int64_t n, int64_t K, int64_t D) {
  nn::ModelConfig c;
  c.d_model = d;
  c.ffn.kind = kind;
  c.ffn.n_experts = n;
  c.ffn.top_k = K;
  c.ffn.expert_width = D;
  return c;
}

}  // namespace uoe::lesson
