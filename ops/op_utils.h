// Shared validation and helpers of the op layer: devices, dtypes, reduced-precision compute.
#pragma once
#include <initializer_list>
#include <string>

#include "core/tensor.h"

namespace uoe::ops {

// All defined tensors on one device (CPU or one GPU); the error names the op and shows every tensor's shape
// and device. Ops whose kernels exist on both devices dispatch with UOE_KERNEL (ops/backend.h).
void check_same_device(const char* op, std::initializer_list<Tensor> tensors);
// Floating dtype required; the error names the op, the argument and its dtype.
void check_floating(const char* op, const char* arg, const Tensor& t);
void check_same_dtype(const char* op, const Tensor& a, const Tensor& b);
// Two operands of an elementwise op: one device (CPU or GPU), one dtype, broadcastable shapes.
void check_binary(const char* op, const Tensor& a, const Tensor& b);
// Integer (int32/int64) index tensor required.
void check_index(const char* op, const char* arg, const Tensor& t);

// Reduced floats (bf16, f16) are computed in float32: returns t cast up, or t itself.
Tensor compute_view(const Tensor& t);
// The dtype kernels compute in for a tensor of dtype t.
inline DType compute_dtype(DType t) { return is_reduced_float(t) ? DType::Float32 : t; }
// Casts a float32 result back to `dtype` when that is a reduced float.
Tensor restore_dtype(const Tensor& t, DType dtype);
// Whether ops with a native bfloat16 kernel use it for `t`: a bfloat16 tensor on a GPU (tensor-core GEMMs with
// float32 accumulation). Elsewhere reduced floats are computed in float32, except in the GEMM family (matmul,
// expert_ffn), which has bfloat16 kernels on both devices.
inline bool native_bf16(const Tensor& t) { return t.is_cuda() && t.dtype() == DType::BFloat16; }
// What a kernel with a bfloat16 variant reads: the tensor itself where that variant runs (native_bf16: it
// computes in float32 and rounds once, as the float32 route does), else compute_view.
inline Tensor kernel_view(const Tensor& t) { return native_bf16(t) ? t : compute_view(t); }

// For an in-place write of `src` into `self`: refuses a `self` whose elements overlap (an expanded view, stride
// 0), and returns `src`, copied first when it is another view of self's storage (it would be read after written).
Tensor inplace_source(const char* op, const Tensor& self, const Tensor& src);
TensorOptions like(const Tensor& t);  // same dtype and device, no grad
std::string describe(const Tensor& t);  // "float32[2, 3] on cpu"

}  // namespace uoe::ops
