// Tensor allocation: empty (the factories that fill values run kernels: ops/factories.cpp).
#include <algorithm>

#include "core/error.h"
#include "core/tensor.h"

namespace uoe {
namespace {

// The bytes a tensor of `shape` and `dtype` needs; negative dimensions and sizes past int64 are refused.
size_t checked_nbytes(const Shape& shape, DType dtype) {
  for (int64_t d : shape) UOE_CHECK(d >= 0, "[empty] negative dimension in shape ", shape_str(shape));
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  int64_t bytes = int64_t(dtype_size(dtype));
  for (int64_t d : shape)
    UOE_CHECK(!__builtin_mul_overflow(bytes, d, &bytes), "[empty] shape ", shape_str(shape), " of ", dtype_name(dtype),
              " needs more than 2^63 bytes");
  return size_t(bytes);
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions opt) {
  auto storage = std::make_shared<Storage>(checked_nbytes(shape, opt.dtype), opt.device);
  Tensor t = make_tensor(std::move(storage), shape, contiguous_strides(shape), 0, opt.dtype);
  if (opt.requires_grad) t.requires_grad_(true);
  return t;
}

}  // namespace uoe
