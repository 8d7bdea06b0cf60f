// Validation helpers of the op layer.
#include "ops/op_utils.h"

#include "core/error.h"

namespace uoe::ops {

std::string describe(const Tensor& t) {
  return std::string(dtype_name(t.dtype())) + shape_str(t.shape()) + " on " + t.device().str();
}

namespace {

std::string describe_all(std::initializer_list<Tensor> tensors) {
  std::string all;
  for (const Tensor& t : tensors) all += (all.empty() ? "" : ", ") + (t.defined() ? describe(t) : std::string("undefined"));
  return all;
}

}  // namespace

void check_same_device(const char* op, std::initializer_list<Tensor> tensors) {
  const Tensor* first = nullptr;
  for (const Tensor& t : tensors) {
    UOE_CHECK(t.defined(), "[", op, "] got an undefined tensor");
    if (!first) first = &t;
    UOE_CHECK(t.device() == first->device(), "[", op, "] all tensors must be on one device, got ", describe_all(tensors));
  }
}

void check_floating(const char* op, const char* arg, const Tensor& t) {
  UOE_CHECK(is_floating(t.dtype()), "[", op, "] ", arg, " must be a floating-point tensor, got ", describe(t));
}

void check_same_dtype(const char* op, const Tensor& a, const Tensor& b) {
  UOE_CHECK(a.dtype() == b.dtype(), "[", op, "] dtypes differ: ", describe(a), " and ", describe(b));
}

void check_binary(const char* op, const Tensor& a, const Tensor& b) {
  check_same_device(op, {a, b});
  UOE_CHECK(a.dtype() == b.dtype(), "[", op, "] dtypes differ: a is ", describe(a), " and b is ", describe(b));
  broadcast_shapes(a.shape(), b.shape(), op);
}

void check_index(const char* op, const char* arg, const Tensor& t) {
  UOE_CHECK(is_integral(t.dtype()), "[", op, "] ", arg, " must be an int32 or int64 tensor, got ", describe(t));
}

Tensor compute_view(const Tensor& t) { return is_reduced_float(t.dtype()) ? t.to(DType::Float32) : t; }

Tensor restore_dtype(const Tensor& t, DType dtype) { return t.dtype() == dtype ? t : t.to(dtype); }

Tensor inplace_source(const char* op, const Tensor& self, const Tensor& src) {
  for (int64_t d = 0; d < self.dim(); ++d)
    UOE_CHECK(self.stride(d) != 0 || self.size(d) <= 1, "[", op, "] the target ", describe(self),
              " is an expanded view (stride 0 in dim ", d, "): its elements overlap, so an in-place write is "
              "ambiguous; write into a tensor of its own (.contiguous())");
  const bool same_view = src.storage() == self.storage() && src.offset() == self.offset() &&
                         src.shape() == self.shape() && src.strides() == self.strides();
  return src.storage() == self.storage() && !same_view ? src.clone() : src;
}

TensorOptions like(const Tensor& t) { return TensorOptions{}.with_dtype(t.dtype()).with_device(t.device()); }

}  // namespace uoe::ops
