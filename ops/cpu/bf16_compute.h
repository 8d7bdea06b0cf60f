// bfloat16 as a storage type of the CPU's elementwise, reduce and index kernels: elements are loaded into float
// registers, computed (and accumulated) in float32 and rounded to nearest even once when stored, so a kernel run on
// bfloat16 gives the bits the float32 route (cast up, compute, cast down) gives. In a UOE_SIMD loop the load is a
// 16-bit widen and shift and the store core/half.h's integer rounding, both vectorised (16 lanes on AVX-512).
#pragma once
#include <type_traits>

#include "core/dtype.h"
#include "core/half.h"

namespace uoe::cpu {

// The type a kernel computes in for storage type T: float for bfloat16, T itself otherwise.
template <typename T>
using compute_t = std::conditional_t<std::is_same_v<T, BFloat16>, float, T>;

// dispatch_float (core/dtype.h) plus bfloat16.
template <typename F>
decltype(auto) dispatch_float_bf16(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f(TypeTag<BFloat16>{});
  return dispatch_float(t, op, f);
}

// dispatch_arith (core/dtype.h) plus bfloat16.
template <typename F>
decltype(auto) dispatch_arith_bf16(DType t, const char* op, F&& f) {
  if (t == DType::BFloat16) return f(TypeTag<BFloat16>{});
  return dispatch_arith(t, op, f);
}

}  // namespace uoe::cpu
