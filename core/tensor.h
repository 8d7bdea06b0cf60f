// Tensor: a cheap value handle to shape, strides, offset, dtype and shared Storage, plus autograd metadata.
//
// Where its methods live (the library targets of CMakeLists.txt): metadata, data access, autograd *state*, detach()
// and empty() are core's (core/tensor.cpp, factories.cpp). The rest is an op-level facade, declared here so that the
// code above core writes t.to(...) or a + b, and defined in uoe_ops: the views, copies and conversions, item() and
// to_vector(), printing, in-place ops, arithmetic operators and the factories that fill values (ops/views.cpp,
// copy.cpp, tensor_convert.cpp, tensor_print.cpp, inplace.cpp, binary.cpp, factories.cpp), and backward(),
// register_hook() and retain_grad(), which hand the autograd engine the ops' arithmetic (ops/tensor_autograd.cpp).
// No lower layer calls up into the facade: core copies bytes across devices itself (core/device_copy.h), the engine
// gets its arithmetic as an argument (autograd/gradient_math.h), and the build links every layer without the ones
// above it (the <layer>_floor_link programs of CMakeLists.txt, ctest floors.link).
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/storage.h"

namespace uoe {

namespace autograd {
class Node;
}
class Tensor;
class Generator;

using GradHook = std::function<Tensor(const Tensor&)>;  // returns a replacement grad, or an undefined Tensor to keep it

// Autograd state of one tensor. Leaves that require grad own `grad`; non-leaves point at
// the Node that produced them.
struct AutogradMeta {
  bool requires_grad = false;
  std::shared_ptr<Tensor> grad;
  std::shared_ptr<autograd::Node> grad_fn;        // null for leaves
  std::weak_ptr<autograd::Node> grad_accumulator;  // leaves: the shared AccumulateGrad node
  std::vector<GradHook> leaf_hooks;                // leaves: run before accumulation
  bool retains_grad = false;                       // non-leaves: keep .grad after backward
};

struct TensorImpl : std::enable_shared_from_this<TensorImpl> {
  std::shared_ptr<Storage> storage;
  Shape shape, strides;  // strides in elements
  int64_t offset = 0;    // in elements
  DType dtype = DType::Float32;
  AutogradMeta autograd;
};

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
  bool requires_grad = false;
  TensorOptions& with_dtype(DType d) { dtype = d; return *this; }
  TensorOptions& with_device(Device d) { device = d; return *this; }
  TensorOptions& with_requires_grad(bool r = true) { requires_grad = r; return *this; }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  // ---- metadata ----
  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const { return impl().shape; }
  const Shape& strides() const { return impl().strides; }
  int64_t dim() const { return int64_t(impl().shape.size()); }
  int64_t size(int64_t d) const;  // negative d counts from the end
  int64_t stride(int64_t d) const;
  int64_t numel() const { return shape_numel(impl().shape); }
  int64_t offset() const { return impl().offset; }
  DType dtype() const { return impl().dtype; }
  Device device() const { return impl().storage->device(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_contiguous() const;
  size_t itemsize() const { return dtype_size(dtype()); }
  const std::shared_ptr<Storage>& storage() const { return impl().storage; }
  TensorImpl* unsafe_impl() const { return impl_.get(); }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }
  // True when this handle is the only one to its tensor and no other tensor views its storage: writing into it in
  // place can change nothing anyone else sees.
  bool sole_owner() const { return impl_.use_count() == 1 && storage().use_count() == 1; }

  // Pointer to element [0,...,0]; T must match the dtype.
  template <typename T> T* data_ptr() const {
    check_dtype(dtype_of<T>(), "data_ptr");
    return static_cast<T*>(raw_data());
  }
  void* raw_data() const;

  // ---- autograd ----
  bool requires_grad() const { return impl().autograd.requires_grad; }
  Tensor& requires_grad_(bool r = true);
  Tensor grad() const;
  void set_grad(const Tensor& g);
  const std::shared_ptr<autograd::Node>& grad_fn() const { return impl().autograd.grad_fn; }
  bool is_leaf() const { return !impl().autograd.grad_fn; }
  // Backward from this tensor: a scalar needs no gradient; otherwise `grad` has this shape.
  void backward(const Tensor& grad = Tensor(), bool retain_graph = false) const;
  void register_hook(GradHook hook) const;
  void retain_grad() const;
  bool retains_grad() const { return impl().autograd.retains_grad; }
  // Same data, no autograd history.
  Tensor detach() const;
  uint64_t version() const { return storage()->version(); }
  void bump_version() const { storage()->bump_version(); }

  // ---- views (no copy; differentiable) ----
  Tensor view(const Shape& shape) const;     // needs compatible strides; -1 infers one dim
  Tensor reshape(const Shape& shape) const;  // a view when possible, else a copy
  Tensor permute(const Shape& dims) const;
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor mT() const { return transpose(-2, -1); }
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, int64_t start, int64_t end, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor expand(const Shape& shape) const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor contiguous() const;  // itself when already contiguous

  // ---- copies and conversion ----
  Tensor clone() const;
  Tensor to(DType dtype) const;
  Tensor to(Device device) const;
  template <typename T> T item() const;
  template <typename T> std::vector<T> to_vector() const;
  std::string str() const;  // PyTorch-like printing

  // ---- in-place (bump the version; refuse tensors that need grad while grad mode is on) ----
  Tensor& zero_();
  Tensor& fill_(double value);
  Tensor& add_(const Tensor& other, double alpha = 1.0);
  Tensor& mul_(const Tensor& other);
  Tensor& mul_(double value);
  Tensor& copy_(const Tensor& src);

  // Raises "[op] expected dtype X, got Y".
  void check_dtype(DType expected, const char* op) const;

 private:
  TensorImpl& impl() const;
  std::shared_ptr<TensorImpl> impl_;
};

// Wraps storage into a new tensor (no autograd history).
Tensor make_tensor(std::shared_ptr<Storage> storage, Shape shape, Shape strides, int64_t offset, DType dtype);
// A view of `base`'s storage with the given geometry and no autograd history.
Tensor alias_with(const Tensor& base, Shape shape, Shape strides, int64_t offset);

// ---- factories ----
Tensor empty(const Shape& shape, TensorOptions opt = {});
Tensor zeros(const Shape& shape, TensorOptions opt = {});
Tensor ones(const Shape& shape, TensorOptions opt = {});
Tensor full(const Shape& shape, double value, TensorOptions opt = {});
Tensor zeros_like(const Tensor& t);
Tensor arange(double start, double end, double step = 1.0, TensorOptions opt = {});
// Random numbers from a counter-based generator: the same values on every thread count
// and device for the same seed. Without a generator the global default one is used.
Tensor rand(const Shape& shape, TensorOptions opt = {}, Generator* gen = nullptr);   // U[0,1)
Tensor randn(const Shape& shape, TensorOptions opt = {}, Generator* gen = nullptr);  // N(0,1)
Tensor randint(int64_t low, int64_t high, const Shape& shape, TensorOptions opt = {.dtype = DType::Int64},
               Generator* gen = nullptr);
// The dtype is T's unless `opt` says otherwise.
template <typename T> Tensor from_vector(const std::vector<T>& values, const Shape& shape, TensorOptions opt);
template <typename T> Tensor from_vector(const std::vector<T>& values, const Shape& shape) {
  return from_vector(values, shape, TensorOptions{}.with_dtype(dtype_of<T>()));
}
Tensor scalar_tensor(double value, TensorOptions opt = {});

std::ostream& operator<<(std::ostream& os, const Tensor& t);

// Arithmetic with broadcasting (differentiable; defined with the ops in ops/).
Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, double b);
Tensor operator-(const Tensor& a, double b);
Tensor operator*(const Tensor& a, double b);
Tensor operator/(const Tensor& a, double b);
Tensor operator*(double a, const Tensor& b);
Tensor operator-(double a, const Tensor& b);
Tensor operator-(const Tensor& a);

}  // namespace uoe
