// DType sizes and names.
#include "core/dtype.h"

namespace uoe {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float32: return 4;
    case DType::Float64: return 8;
    case DType::BFloat16: return 2;
    case DType::Float16: return 2;
    case DType::Int32: return 4;
    case DType::Int64: return 8;
    case DType::Bool: return 1;
  }
  fail("[dtype] unknown dtype");
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float16: return "float16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
  }
  return "unknown";
}

DType dtype_from_name(const std::string& name) {
  for (DType t : {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16, DType::Int32,
                  DType::Int64, DType::Bool})
    if (name == dtype_name(t)) return t;
  if (name == "f32") return DType::Float32;
  if (name == "bf16") return DType::BFloat16;
  if (name == "f16") return DType::Float16;
  fail("[dtype] unknown dtype '", name,
       "': expected float32, float64, bfloat16, float16, int32, int64 or bool");
}

}  // namespace uoe
