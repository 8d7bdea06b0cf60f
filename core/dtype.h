// DType: element types of tensors, their sizes and names, and type dispatch.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"
#include "core/half.h"

namespace uoe {

enum class DType : uint8_t { Float32, Float64, BFloat16, Float16, Int32, Int64, Bool };

size_t dtype_size(DType t);
const char* dtype_name(DType t);  // "float32", "bfloat16", ...
DType dtype_from_name(const std::string& name);
inline bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::BFloat16 || t == DType::Float16;
}
inline bool is_reduced_float(DType t) { return t == DType::BFloat16 || t == DType::Float16; }
inline bool is_integral(DType t) { return t == DType::Int32 || t == DType::Int64; }

template <typename T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::Float32; }
template <> constexpr DType dtype_of<double>() { return DType::Float64; }
template <> constexpr DType dtype_of<BFloat16>() { return DType::BFloat16; }
template <> constexpr DType dtype_of<Float16>() { return DType::Float16; }
template <> constexpr DType dtype_of<int32_t>() { return DType::Int32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::Int64; }
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }

template <typename T> struct TypeTag { using type = T; };

// Calls f(TypeTag<T>{}) for the compute types float and double; other dtypes raise an
// error naming `op`. Reduced floats are computed in float32 by the op layer, not here.
template <typename F>
decltype(auto) dispatch_float(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    default: fail("[", op, "] expected a float32 or float64 tensor, got ", dtype_name(t));
  }
}

// Calls f(TypeTag<T>{}) for every dtype.
template <typename F>
decltype(auto) dispatch_all(DType t, F&& f) {
  switch (t) {
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    case DType::BFloat16: return f(TypeTag<BFloat16>{});
    case DType::Float16: return f(TypeTag<Float16>{});
    case DType::Int32: return f(TypeTag<int32_t>{});
    case DType::Int64: return f(TypeTag<int64_t>{});
    case DType::Bool: return f(TypeTag<bool>{});
  }
  fail("[dispatch] unknown dtype");
}

// Calls f(TypeTag<T>{}) for the dtypes that arithmetic kernels compute in:
// float, double, int32, int64.
template <typename F>
decltype(auto) dispatch_arith(DType t, const char* op, F&& f) {
  switch (t) {
    case DType::Float32: return f(TypeTag<float>{});
    case DType::Float64: return f(TypeTag<double>{});
    case DType::Int32: return f(TypeTag<int32_t>{});
    case DType::Int64: return f(TypeTag<int64_t>{});
    default: fail("[", op, "] does not compute in ", dtype_name(t));
  }
}

}  // namespace uoe
