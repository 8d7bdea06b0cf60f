// CUDA elementwise kernels over broadcast, strided operands (elementwise_loop.cuh). The math follows
// ops/cpu/vec_math.h formula for formula (same stable forms, clamps and special values) with CUDA's libm
// (expf, erfcf, ...: within 2 ulp) in place of the CPU's own float polynomials; double uses the CPU's double forms.
// bfloat16 operands are read as they are, computed in float32 and the result rounded once (as a float32 kernel
// between two casts would, without the float32 copies).
#include "ops/kernels/elementwise.h"

#include <type_traits>

#include "cuda/activation.cuh"
#include "cuda/elementwise_loop.cuh"
#include "cuda/launch.h"
#include "cuda/storage_access.cuh"

namespace uoe::cuda {
namespace {

// ---- libm by type ------------------------------------------------------------------------------
__device__ __forceinline__ float m_exp(float x) { return expf(x); }
__device__ __forceinline__ double m_exp(double x) { return exp(x); }
__device__ __forceinline__ float m_log(float x) { return logf(x); }
__device__ __forceinline__ double m_log(double x) { return log(x); }
__device__ __forceinline__ float m_sqrt(float x) { return sqrtf(x); }
__device__ __forceinline__ double m_sqrt(double x) { return sqrt(x); }
__device__ __forceinline__ float m_tanh(float x) { return tanhf(x); }
__device__ __forceinline__ double m_tanh(double x) { return tanh(x); }
__device__ __forceinline__ float m_erfc(float x) { return erfcf(x); }
__device__ __forceinline__ double m_erfc(double x) { return erfc(x); }
__device__ __forceinline__ float m_abs(float x) { return fabsf(x); }
__device__ __forceinline__ double m_abs(double x) { return fabs(x); }
__device__ __forceinline__ float m_pow(float x, float y) { return powf(x, y); }
__device__ __forceinline__ double m_pow(double x, double y) { return pow(x, y); }

// softplus(x) = max(x, 0) + log1p(exp(-|x|)) (vm::softplus with CUDA's log1p): +-inf give inf / 0, NaN stays NaN.
__device__ __forceinline__ float softplus(float x) { return max_keep_nan(x, 0.0f) + log1pf(m_exp(-m_abs(x))); }
__device__ __forceinline__ double softplus(double x) { return max_keep_nan(x, 0.0) + log1p(m_exp(-m_abs(x))); }

// ---- the gelus of vm:: (ops/cpu/vec_math.h), float and double forms (sigmoid and silu: cuda/activation.cuh) ----
// gelu, tanh approximation: x sigma(v), v = x (c1 + c2 x^2) (= 2 sqrt(2/pi) (x + 0.044715 x^3)).
__device__ __forceinline__ float gelu_tanh(float x) {
  const float xc = max_keep_nan(x, -20.0f);
  const float v = xc * (1.59576912161f + 0.0713548162726f * (xc * xc));
  return xc * sigmoid(v);
}
__device__ __forceinline__ double gelu_tanh(double x) {
  const double xc = max_keep_nan(x, -40.0);
  return xc * sigmoid(xc * (1.5957691216057308 + 0.07135481627260025 * xc * xc));
}
// gelu'(x) = sigma(v) + x sigma'(v) v', v' = c1 + 3 c2 x^2
__device__ __forceinline__ float gelu_tanh_grad(float x) {
  const float xc = clamp_keep_nan(x, -20.0f, 20.0f);
  const float x2 = xc * xc;
  const float v = xc * (1.59576912161f + 0.0713548162726f * x2);
  const float dv = 1.59576912161f + 0.214064448818f * x2;
  const float e = m_exp(-m_abs(v));
  const float inv = 1.0f / (1.0f + e);
  const float s = v >= 0.0f ? inv : e * inv;
  return s + xc * (e * inv * inv) * dv;
}
__device__ __forceinline__ double gelu_tanh_grad(double x) {
  const double xc = clamp_keep_nan(x, -40.0, 40.0);
  const double x2 = xc * xc;
  const double v = xc * (1.5957691216057308 + 0.07135481627260025 * x2);
  return sigmoid(v) + xc * sigmoid_grad(v) * (1.5957691216057308 + 0.21406444881780076 * x2);
}

// Exact gelu: x Phi(x), Phi(x) = erfc(-x/sqrt2)/2 (relative accuracy kept for x << 0).
__device__ __forceinline__ float gelu_erf(float x) {
  const float xc = max_keep_nan(x, -20.0f);
  return xc * (0.5f * m_erfc(-xc * 0.707106781187f));
}
__device__ __forceinline__ double gelu_erf(double x) {
  const double xc = max_keep_nan(x, -40.0);
  return xc * 0.5 * m_erfc(-xc * 0.7071067811865476);
}
// d/dx x Phi(x) = Phi(x) + x phi(x)
__device__ __forceinline__ float gelu_erf_grad(float x) {
  const float xc = clamp_keep_nan(x, -20.0f, 20.0f);
  const float pdf = 0.398942280401f * m_exp(-0.5f * (xc * xc));
  return 0.5f * m_erfc(-xc * 0.707106781187f) + xc * pdf;
}
__device__ __forceinline__ double gelu_erf_grad(double x) {
  const double xc = clamp_keep_nan(x, -40.0, 40.0);
  return 0.5 * m_erfc(-xc * 0.7071067811865476) + xc * 0.3989422804014327 * m_exp(-0.5 * xc * xc);
}

// ---- functors ---------------------------------------------------------------------------------------
template <typename T, UnaryKind K>
struct Unary {
  __device__ __forceinline__ T operator()(T v) const {
    if constexpr (K == UnaryKind::Neg) return T(-v);
    else if constexpr (K == UnaryKind::Abs) {  // fabs for floats: abs(-0) = +0
      if constexpr (std::is_floating_point_v<T>) return fabs(v);
      else return v < T(0) ? T(-v) : v;
    } else if constexpr (K == UnaryKind::Sign) return T((v > T(0)) - (v < T(0)));
    else if constexpr (K == UnaryKind::Relu) return !(v <= T(0)) ? v : T(0);  // NaN stays NaN
    else if constexpr (K == UnaryKind::Exp) return m_exp(v);
    else if constexpr (K == UnaryKind::Log) return m_log(v);
    else if constexpr (K == UnaryKind::Sqrt) return m_sqrt(v);
    else if constexpr (K == UnaryKind::Rsqrt) return T(1) / m_sqrt(v);
    else if constexpr (K == UnaryKind::Tanh) return m_tanh(v);
    else if constexpr (K == UnaryKind::Sigmoid) return sigmoid(v);
    else if constexpr (K == UnaryKind::Gelu) return gelu_erf(v);
    else if constexpr (K == UnaryKind::GeluTanh) return gelu_tanh(v);
    else if constexpr (K == UnaryKind::Silu) return silu(v);
    else return softplus(v);
  }
};

template <typename T, ActivationGrad K>
struct ActGrad {
  __device__ __forceinline__ T operator()(T v, T d) const {
    if constexpr (K == ActivationGrad::Gelu) return d * gelu_erf_grad(v);
    else if constexpr (K == ActivationGrad::GeluTanh) return d * gelu_tanh_grad(v);
    else return d * silu_grad(v);
  }
};

// SwiGLU's gating: silu(g) * p.
template <typename T>
struct SwiGlu {
  __device__ __forceinline__ T operator()(T g, T p) const { return silu(g) * p; }
};

// dg = (dh * p) * silu'(g), dp = dh * silu(g) over n contiguous elements of storage S.
template <typename S>
__global__ void swiglu_backward_kernel(const S* g, const S* p, const S* dh, S* dg, S* dp, int64_t n) {
  using C = compute_t<S>;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const C gi = load_as<C>(g + i), pi = load_as<C>(p + i), di = load_as<C>(dh + i);
    store_as(dg + i, (di * pi) * silu_grad(gi));
    store_as(dp + i, di * silu(gi));
  }
}

template <typename T, BinaryKind K>
struct Arith {
  __device__ __forceinline__ T operator()(T x, T y) const {
    if constexpr (K == BinaryKind::Add) return T(x + y);
    else if constexpr (K == BinaryKind::Sub) return T(x - y);
    else if constexpr (K == BinaryKind::Mul) return T(x * y);
    else if constexpr (K == BinaryKind::Div) return T(x / y);
    else return T(m_pow(x, y));
  }
};

// f on storage S: operands widened to compute_t<S>, the result stored back in S (bfloat16: rounded to nearest
// even; float, double and the integers unchanged).
template <typename S, typename F>
struct OnStorage {
  F f;
  template <typename... A>
  __device__ __forceinline__ S operator()(A... v) const {
    S out;
    store_as(&out, f(load_as<compute_t<S>>(&v)...));
    return out;
  }
};

template <typename S>
struct Compare {
  BinaryKind kind;
  __device__ __forceinline__ bool operator()(S sa, S sb) const {
    const compute_t<S> a = load_as<compute_t<S>>(&sa), b = load_as<compute_t<S>>(&sb);
    switch (kind) {
      case BinaryKind::Eq: return a == b;
      case BinaryKind::Ne: return a != b;
      case BinaryKind::Lt: return a < b;
      case BinaryKind::Le: return a <= b;
      case BinaryKind::Gt: return a > b;
      default: return a >= b;
    }
  }
};

template <typename U>
struct Select {
  __device__ __forceinline__ U operator()(bool c, U x, U y) const { return c ? x : y; }
};

Tensor new_like(const Shape& shape, DType dtype, const Tensor& device_of) {
  return empty(shape, TensorOptions{}.with_dtype(dtype).with_device(device_of.device()));
}

template <typename T, UnaryKind K>
void run_unary(const Tensor& out, const Tensor& x) {
  elementwise<T, T>("unary", OnStorage<T, Unary<compute_t<T>, K>>{}, out, {&x});
}

template <typename T>
void unary_float(UnaryKind kind, const Tensor& out, const Tensor& x) {
  switch (kind) {
    case UnaryKind::Exp: return run_unary<T, UnaryKind::Exp>(out, x);
    case UnaryKind::Log: return run_unary<T, UnaryKind::Log>(out, x);
    case UnaryKind::Sqrt: return run_unary<T, UnaryKind::Sqrt>(out, x);
    case UnaryKind::Rsqrt: return run_unary<T, UnaryKind::Rsqrt>(out, x);
    case UnaryKind::Tanh: return run_unary<T, UnaryKind::Tanh>(out, x);
    case UnaryKind::Sigmoid: return run_unary<T, UnaryKind::Sigmoid>(out, x);
    case UnaryKind::Gelu: return run_unary<T, UnaryKind::Gelu>(out, x);
    case UnaryKind::GeluTanh: return run_unary<T, UnaryKind::GeluTanh>(out, x);
    case UnaryKind::Silu: return run_unary<T, UnaryKind::Silu>(out, x);
    case UnaryKind::Softplus: return run_unary<T, UnaryKind::Softplus>(out, x);
    default: fail("[unary] internal: kind not handled for floats");
  }
}

template <typename T>
void unary_signed(UnaryKind kind, const Tensor& out, const Tensor& x) {
  switch (kind) {
    case UnaryKind::Neg: return run_unary<T, UnaryKind::Neg>(out, x);
    case UnaryKind::Abs: return run_unary<T, UnaryKind::Abs>(out, x);
    case UnaryKind::Sign: return run_unary<T, UnaryKind::Sign>(out, x);
    case UnaryKind::Relu: return run_unary<T, UnaryKind::Relu>(out, x);
    default: fail("[unary] internal: kind not handled");
  }
}

template <typename T, BinaryKind K>
void run_arith(const Tensor& out, const Tensor& a, const Tensor& b) {
  elementwise<T, T, T>("binary", OnStorage<T, Arith<compute_t<T>, K>>{}, out, {&a, &b});
}

// dispatch_float / dispatch_arith (core/dtype.h) with bfloat16 added, as __nv_bfloat16 storage.
template <typename F>
void dispatch_float_bf16(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f(TypeTag<__nv_bfloat16>{});
  dispatch_float(t, op, f);
}
template <typename F>
void dispatch_arith_bf16(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f(TypeTag<__nv_bfloat16>{});
  dispatch_arith(t, op, f);
}

void check_on_gpu(const char* op, std::initializer_list<Tensor> ts) {
  const Tensor& first = *ts.begin();
  for (const Tensor& t : ts)
    UOE_CHECK(t.is_cuda() && t.device() == first.device(), "[", op, "] CUDA kernel needs every tensor on one GPU, got ",
              t.device().str(), " and ", first.device().str());
}

}  // namespace

Tensor unary(UnaryKind kind, const Tensor& x) {
  check_on_gpu("unary", {x});
  Tensor out = new_like(x.shape(), x.dtype(), x);
  const bool sign_like = kind == UnaryKind::Neg || kind == UnaryKind::Abs || kind == UnaryKind::Sign ||
                         kind == UnaryKind::Relu;
  if (sign_like) {
    dispatch_arith_bf16(x.dtype(), "unary",
                        [&](auto tag) { unary_signed<typename decltype(tag)::type>(kind, out, x); });
  } else {
    dispatch_float_bf16(x.dtype(), "unary", [&](auto tag) { unary_float<typename decltype(tag)::type>(kind, out, x); });
  }
  return out;
}

Tensor activation_grad(ActivationGrad kind, const Tensor& x, const Tensor& g) {
  check_on_gpu("activation_grad", {x, g});
  UOE_CHECK(x.dtype() == g.dtype(), "[activation_grad] dtypes differ: ", dtype_name(x.dtype()), " and ",
            dtype_name(g.dtype()));
  Tensor out = new_like(broadcast_shapes(x.shape(), g.shape(), "activation_grad"), x.dtype(), x);
  dispatch_float_bf16(x.dtype(), "activation_grad", [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = compute_t<T>;
    switch (kind) {
      case ActivationGrad::Gelu:
        return elementwise<T, T, T>("activation_grad", OnStorage<T, ActGrad<C, ActivationGrad::Gelu>>{}, out, {&x, &g});
      case ActivationGrad::GeluTanh:
        return elementwise<T, T, T>("activation_grad", OnStorage<T, ActGrad<C, ActivationGrad::GeluTanh>>{}, out,
                                    {&x, &g});
      case ActivationGrad::Silu:
        return elementwise<T, T, T>("activation_grad", OnStorage<T, ActGrad<C, ActivationGrad::Silu>>{}, out, {&x, &g});
    }
  });
  return out;
}

Tensor swiglu(const Tensor& g, const Tensor& p) {
  check_on_gpu("swiglu", {g, p});
  UOE_CHECK(g.dtype() == p.dtype() && g.shape() == p.shape(), "[swiglu] internal: g and p differ in dtype or shape");
  Tensor out = new_like(g.shape(), g.dtype(), g);
  dispatch_float_bf16(g.dtype(), "swiglu", [&](auto tag) {
    using T = typename decltype(tag)::type;
    elementwise<T, T, T>("swiglu", OnStorage<T, SwiGlu<compute_t<T>>>{}, out, {&g, &p});
  });
  return out;
}

void swiglu_backward(const Tensor& g, const Tensor& p, const Tensor& dh, const Tensor& dg, const Tensor& dp) {
  check_on_gpu("swiglu_backward", {g, p, dh, dg, dp});
  for (const Tensor* t : {&g, &p, &dh, &dg, &dp})
    UOE_CHECK(t->is_contiguous() && t->shape() == g.shape() && t->dtype() == g.dtype(),
              "[swiglu_backward] internal: every operand must be contiguous, of g's shape and dtype");
  const int64_t n = g.numel();
  if (n == 0) return;
  constexpr int kThreads = 256;
  const unsigned blocks = unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 65535));
  const LaunchContext ctx = launch_context("swiglu_backward");
  dispatch_float_bf16(g.dtype(), "swiglu_backward", [&](auto tag) {
    using T = typename decltype(tag)::type;
    swiglu_backward_kernel<T><<<blocks, kThreads, 0, ctx.stream>>>(
        static_cast<const T*>(g.raw_data()), static_cast<const T*>(p.raw_data()), static_cast<const T*>(dh.raw_data()),
        static_cast<T*>(dg.raw_data()), static_cast<T*>(dp.raw_data()), n);
  });
  check_launch("swiglu_backward");
}

void binary_into(BinaryKind kind, const Tensor& out, const Tensor& a, const Tensor& b) {
  check_on_gpu("binary", {out, a, b});
  UOE_CHECK(a.dtype() == b.dtype(), "[binary] dtypes differ: ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  UOE_CHECK(out.dtype() == (kind >= BinaryKind::Eq ? DType::Bool : a.dtype()), "[binary] internal: output dtype ",
            dtype_name(out.dtype()), " does not fit operands of ", dtype_name(a.dtype()));
  dispatch_arith_bf16(a.dtype(), "binary", [&](auto tag) {
    using T = typename decltype(tag)::type;
    if (kind >= BinaryKind::Eq) return elementwise<bool, T, T>("compare", Compare<T>{kind}, out, {&a, &b});
    switch (kind) {
      case BinaryKind::Add: return run_arith<T, BinaryKind::Add>(out, a, b);
      case BinaryKind::Sub: return run_arith<T, BinaryKind::Sub>(out, a, b);
      case BinaryKind::Mul: return run_arith<T, BinaryKind::Mul>(out, a, b);
      case BinaryKind::Div: return run_arith<T, BinaryKind::Div>(out, a, b);
      case BinaryKind::Pow:
        if constexpr (std::is_floating_point_v<compute_t<T>>) return run_arith<T, BinaryKind::Pow>(out, a, b);
        fail("[pow] needs floating-point tensors");
      default: fail("[binary] internal: kind not handled");
    }
  });
}

Tensor binary(BinaryKind kind, const Tensor& a, const Tensor& b) {
  const Shape shape = broadcast_shapes(a.shape(), b.shape(), "binary");
  Tensor out = new_like(shape, kind >= BinaryKind::Eq ? DType::Bool : a.dtype(), a);
  cuda::binary_into(kind, out, a, b);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_on_gpu("where", {cond, a, b});
  UOE_CHECK(cond.dtype() == DType::Bool, "[where] cond must be bool, got ", dtype_name(cond.dtype()));
  UOE_CHECK(a.dtype() == b.dtype(), "[where] dtypes differ: ", dtype_name(a.dtype()), " and ", dtype_name(b.dtype()));
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = new_like(shape, a.dtype(), a);
  // Selection moves bits: one kernel per element size.
  auto run = [&](auto tag) {
    using U = typename decltype(tag)::type;
    elementwise<U, bool, U, U>("where", Select<U>{}, out, {&cond, &a, &b});
  };
  switch (a.itemsize()) {
    case 1: run(TypeTag<uint8_t>{}); break;
    case 2: run(TypeTag<uint16_t>{}); break;
    case 4: run(TypeTag<uint32_t>{}); break;
    case 8: run(TypeTag<uint64_t>{}); break;
    default: fail("[where] internal: element size ", a.itemsize());
  }
  return out;
}

}  // namespace uoe::cuda
