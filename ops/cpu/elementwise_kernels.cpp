// CPU elementwise kernels over broadcast, strided operands (see loops.h), vectorised through vec_math.h; bfloat16
// operands are computed in float32 and rounded once (bf16_compute.h).
#include "ops/kernels/elementwise.h"

#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "ops/cpu/bf16_compute.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec_math.h"

namespace uoe::cpu {
namespace {

Tensor new_like(const Shape& shape, DType dtype, const Tensor& device_of) {
  return empty(shape, TensorOptions{}.with_dtype(dtype).with_device(device_of.device()));
}

// T: the storage type; the math runs in C (float for bfloat16).
template <typename T>
void unary_float(UnaryKind kind, const Tensor& out, const Tensor& x) {
  using C = compute_t<T>;
  switch (kind) {
    case UnaryKind::Exp: return unary_loop<T, T>(out, x, [](C v) { return vm::exp(v); });
    case UnaryKind::Log: return unary_loop<T, T>(out, x, [](C v) { return vm::log(v); });
    case UnaryKind::Sqrt: return unary_loop<T, T>(out, x, [](C v) { return std::sqrt(v); });
    case UnaryKind::Rsqrt: return unary_loop<T, T>(out, x, [](C v) { return C(1) / std::sqrt(v); });
    case UnaryKind::Tanh: return unary_loop<T, T>(out, x, [](C v) { return vm::tanh(v); });
    case UnaryKind::Sigmoid: return unary_loop<T, T>(out, x, [](C v) { return vm::sigmoid(v); });
    case UnaryKind::Gelu: return unary_loop<T, T>(out, x, [](C v) { return vm::gelu_erf(v); });
    case UnaryKind::GeluTanh: return unary_loop<T, T>(out, x, [](C v) { return vm::gelu(v); });
    case UnaryKind::Silu: return unary_loop<T, T>(out, x, [](C v) { return vm::silu(v); });
    case UnaryKind::Softplus: return unary_loop<T, T>(out, x, [](C v) { return vm::softplus(v); });
    default: fail("[unary] internal: kind not handled for floats");
  }
}

template <typename T>
void unary_signed(UnaryKind kind, const Tensor& out, const Tensor& x) {
  using C = compute_t<T>;
  switch (kind) {
    case UnaryKind::Neg: return unary_loop<T, T>(out, x, [](C v) { return C(-v); });
    case UnaryKind::Abs:  // fabs for floats: abs(-0) = +0
      if constexpr (std::is_floating_point_v<C>) return unary_loop<T, T>(out, x, [](C v) { return std::fabs(v); });
      else return unary_loop<T, T>(out, x, [](C v) { return v < C(0) ? C(-v) : v; });
    case UnaryKind::Sign: return unary_loop<T, T>(out, x, [](C v) { return C((v > C(0)) - (v < C(0))); });
    case UnaryKind::Relu: return unary_loop<T, T>(out, x, [](C v) { return !(v <= C(0)) ? v : C(0); });  // NaN stays
    default: fail("[unary] internal: kind not handled");
  }
}

template <typename T>
bool compare(BinaryKind kind, T a, T b) {
  switch (kind) {
    case BinaryKind::Eq: return a == b;
    case BinaryKind::Ne: return a != b;
    case BinaryKind::Lt: return a < b;
    case BinaryKind::Le: return a <= b;
    case BinaryKind::Gt: return a > b;
    default: return a >= b;
  }
}

}  // namespace

Tensor unary(UnaryKind kind, const Tensor& x) {
  Tensor out = new_like(x.shape(), x.dtype(), x);
  const bool sign_like = kind == UnaryKind::Neg || kind == UnaryKind::Abs || kind == UnaryKind::Sign ||
                         kind == UnaryKind::Relu;
  if (sign_like) {
    dispatch_arith_bf16(x.dtype(), "unary", [&](auto tag) { unary_signed<typename decltype(tag)::type>(kind, out, x); });
  } else {
    dispatch_float_bf16(x.dtype(), "unary", [&](auto tag) { unary_float<typename decltype(tag)::type>(kind, out, x); });
  }
  return out;
}

Tensor activation_grad(ActivationGrad kind, const Tensor& x, const Tensor& g) {
  Tensor out = new_like(broadcast_shapes(x.shape(), g.shape(), "activation_grad"), x.dtype(), x);
  dispatch_float_bf16(x.dtype(), "activation_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    switch (kind) {
      case ActivationGrad::Gelu: return binary_loop<T, T, T>(out, x, g, [](C v, C d) { return d * vm::gelu_erf_grad(v); });
      case ActivationGrad::GeluTanh: return binary_loop<T, T, T>(out, x, g, [](C v, C d) { return d * vm::gelu_grad(v); });
      case ActivationGrad::Silu: return binary_loop<T, T, T>(out, x, g, [](C v, C d) { return d * vm::silu_grad(v); });
    }
  });
  return out;
}

Tensor swiglu(const Tensor& g, const Tensor& p) {
  Tensor out = new_like(g.shape(), g.dtype(), g);
  dispatch_float_bf16(g.dtype(), "swiglu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    binary_loop<T, T, T>(out, g, p, [](C a, C b) { return vm::silu(a) * b; });
  });
  return out;
}

namespace {

// dg, dp of SwiGLU over n contiguous elements, in blocks of the compute type (as loops.h stages bfloat16).
template <typename T>
UOE_SIMD void swiglu_backward_inner(const T* g, const T* p, const T* dh, T* dg, T* dp, int64_t n) {
  using C = compute_t<T>;
  alignas(64) C bg[kBlock], bp[kBlock], bd[kBlock], og[kBlock], op[kBlock];
  for (int64_t k = 0; k < n; k += kBlock) {
    const int64_t m = std::min(kBlock, n - k);
    load_block(bg, g + k, 1, m);
    load_block(bp, p + k, 1, m);
    load_block(bd, dh + k, 1, m);
#pragma omp simd
    for (int64_t i = 0; i < m; ++i) {
      C s, ds;  // silu(g), silu'(g)
      vm::silu_and_grad(bg[i], s, ds);
      og[i] = (bd[i] * bp[i]) * ds;  // the order of the composed silu(g) * p's backward
      op[i] = bd[i] * s;
    }
    store_block(dg + k, 1, og, m);
    store_block(dp + k, 1, op, m);
  }
}

}  // namespace

// Every operand contiguous and of one shape: the loop plan is one run of stride 1, cut into parallel chunks.
void swiglu_backward(const Tensor& g, const Tensor& p, const Tensor& dh, const Tensor& dg, const Tensor& dp) {
  dispatch_float_bf16(g.dtype(), "swiglu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T *pg = g.data_ptr<T>(), *pp = p.data_ptr<T>(), *pd = dh.data_ptr<T>();
    T *og = dg.data_ptr<T>(), *op = dp.data_ptr<T>();
    const auto plan = plan_loop<5>({&dg, &dp, &g, &p, &dh});
    for_each_chunk(plan, [&](const std::array<int64_t, 5>& off, int64_t n, const auto&) {
      swiglu_backward_inner(pg + off[2], pp + off[3], pd + off[4], og + off[0], op + off[1], n);
    });
  });
}

void binary_into(BinaryKind kind, const Tensor& out, const Tensor& a, const Tensor& b) {
  dispatch_arith_bf16(a.dtype(), "binary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    if (kind >= BinaryKind::Eq)
      return binary_loop<bool, T, T>(out, a, b, [kind](C x, C y) { return compare(kind, x, y); });
    switch (kind) {
      case BinaryKind::Add: return binary_loop<T, T, T>(out, a, b, [](C x, C y) { return C(x + y); });
      case BinaryKind::Sub: return binary_loop<T, T, T>(out, a, b, [](C x, C y) { return C(x - y); });
      case BinaryKind::Mul: return binary_loop<T, T, T>(out, a, b, [](C x, C y) { return C(x * y); });
      case BinaryKind::Div:
        if constexpr (std::is_integral_v<C>) {  // (zero divisors are refused by ops::div)
          using U = std::make_unsigned_t<C>;  // min / -1 wraps to min instead of trapping
          return binary_loop<T, T, T>(out, a, b, [](C x, C y) { return y == C(-1) ? C(U(0) - U(x)) : C(x / y); });
        }
        return binary_loop<T, T, T>(out, a, b, [](C x, C y) { return C(x / y); });
      case BinaryKind::Pow:
        if constexpr (std::is_floating_point_v<C>)
          return binary_loop<T, T, T>(out, a, b, [](C x, C y) { return C(std::pow(x, y)); });
        fail("[pow] needs floating-point tensors");
      default: fail("[binary] internal: kind not handled");
    }
  });
}

Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "binary");
  Tensor out = new_like(shape, kind >= BinaryKind::Eq ? DType::Bool : a.dtype(), a);
  binary_into(kind, out, a, b);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = new_like(shape, a.dtype(), a);
  dispatch_all(a.dtype(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    ternary_loop<T, bool, T, T>(out, cond, a, b, [](bool c, T x, T y) { return c ? x : y; });
  });
  return out;
}

}  // namespace uoe::cpu
