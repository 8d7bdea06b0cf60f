// The rowwise op family's own bfloat16 condition (softmax, log_softmax, rms_norm, layer_norm): which tensors its
// kernels read as they are, in bfloat16, rather than through a float32 copy (compute_view).
#pragma once
#include "core/tensor.h"

namespace uoe::ops {

// A bfloat16 tensor on the CPU: the CPU row kernels have bfloat16 overloads (ops/kernels/rowwise.h); a GPU's
// bfloat16 rows are computed in float32.
inline bool rowwise_bf16(const Tensor& t) { return t.is_cpu() && t.dtype() == DType::BFloat16; }

}  // namespace uoe::ops
