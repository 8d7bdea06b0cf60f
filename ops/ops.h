// The op library: every public op, validated, dispatched to its device kernel, differentiable.
#pragma once
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace uoe::ops {

// ---- elementwise (ops/unary.cpp, ops/binary.cpp, ops/compare.cpp) ----
Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor sign(const Tensor& x);  // not differentiable
Tensor tanh(const Tensor& x);
Tensor sigmoid(const Tensor& x);
Tensor relu(const Tensor& x);
Tensor gelu(const Tensor& x, bool tanh_approximation = false);
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x);  // log(1 + exp(x)), beta 1
// Fused derivatives used by the backward of gelu and silu: g * f'(x).
Tensor gelu_backward(const Tensor& x, const Tensor& g, bool tanh_approximation);
Tensor silu_backward(const Tensor& x, const Tensor& g);
// SwiGLU's gating silu(g) * p as one op (g, p: one shape and dtype), and its fused derivatives
// (dg, dp) = ((dh * p) * silu'(g), dh * silu(g)).
Tensor swiglu(const Tensor& g, const Tensor& p);
std::pair<Tensor, Tensor> swiglu_backward(const Tensor& g, const Tensor& p, const Tensor& dh);

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, double exponent);
Tensor scalar_like(double value, const Tensor& t);  // 0-dim tensor with t's dtype and device

Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

// ---- reductions (ops/reduce.cpp) ----
Tensor sum(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor sum(const Tensor& x);  // all elements -> 0-dim
Tensor mean(const Tensor& x, const Shape& dims, bool keepdim = false);
Tensor mean(const Tensor& x);
Tensor max(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor max(const Tensor& x);
Tensor min(const Tensor& x);
Tensor argmax(const Tensor& x, int64_t dim, bool keepdim = false);  // int64, first maximum
// Sums a broadcast gradient back to `shape` (the inverse of broadcasting).
Tensor sum_to(const Tensor& x, const Shape& shape);

// ---- linear algebra (ops/matmul.cpp) ----
// a: [..., M, K] (or [K]), b: [..., K, N] (or [K]); batch dims broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// float32 GEMMs on a GPU may use TF32 tensor cores (10-bit mantissa inputs, float32 accumulation), as PyTorch's
// allow_tf32. Default: off (exact float32, the CPU-parity setting). The CPU, and a build without CUDA, ignore it.
void set_allow_tf32(bool allow);
bool allow_tf32();

// ---- neural-network ops ----
Tensor softmax(const Tensor& x, int64_t dim = -1);
Tensor log_softmax(const Tensor& x, int64_t dim = -1);
// logits: [N, V] (or [..., V]), targets: int [N] (or [...]); mean over targets != ignore_index. The loss is
// float32 for bfloat16 / float16 logits (computed in float32; on a GPU bfloat16 logits are read as they are).
Tensor cross_entropy(const Tensor& logits, const Tensor& targets, int64_t ignore_index = -100);
// weight: [V, d], ids: int [...] -> [..., d]
Tensor embedding(const Tensor& weight, const Tensor& ids);
// Normalise over the last dim; weight (and bias) [d] may be undefined.
Tensor rms_norm(const Tensor& x, const Tensor& weight, double eps = 1e-6);
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, double eps = 1e-5);
// Rotary position embedding on x: [B, T, H, Dh] (Dh even), rotating pairs (i, i + Dh/2) of
// position t + pos_offset by angle (t + pos_offset) * base^(-2i/Dh).
Tensor rope(const Tensor& x, double base = 10000.0, int64_t pos_offset = 0);
// q: [B, H, T, Dh], k, v: [B, Hkv, T, Dh] (H % Hkv == 0, any strides with a contiguous last
// dim) -> [B, H, T, Dh]. Fused, tiled: never holds a full T x T score matrix. scale <= 0 means 1/sqrt(Dh).
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, bool causal = true,
                                    double scale = 0.0);

// ---- indexing (ops/indexing.cpp, ops/topk.cpp) ----
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
// Largest (or smallest) k along dim, sorted; ties keep the lower index first. Returns (values, int64 indices).
std::pair<Tensor, Tensor> topk(const Tensor& x, int64_t k, int64_t dim = -1, bool largest = true);

// ---- joining and splitting (ops/join.cpp) ----
Tensor cat(const std::vector<Tensor>& xs, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& xs, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);

// ---- randomness (ops/dropout.cpp) ----
// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p, bool training = true, Generator* gen = nullptr);

}  // namespace uoe::ops
