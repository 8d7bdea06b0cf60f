// Reading values out of tensors: item() and to_vector().
#include "core/error.h"
#include "core/tensor.h"

namespace uoe {

template <typename T>
std::vector<T> Tensor::to_vector() const {
  const Tensor host = to(Device::cpu()).to(dtype_of<T>()).contiguous();
  const T* p = host.data_ptr<T>();
  return std::vector<T>(p, p + host.numel());
}

template <typename T>
T Tensor::item() const {
  UOE_CHECK(numel() == 1, "[item] needs a tensor with exactly one element, got shape ", shape_str(shape()));
  return to_vector<T>()[0];
}

// Declared before item<bool>() below instantiates to_vector<bool>() (a specialisation after that first use is
// ill-formed: GCC accepts it, clang rejects it).
template <>
std::vector<bool> Tensor::to_vector<bool>() const {
  const Tensor host = to(Device::cpu()).to(DType::Bool).contiguous();
  const bool* p = host.data_ptr<bool>();
  return std::vector<bool>(p, p + host.numel());
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template int32_t Tensor::item<int32_t>() const;
template int64_t Tensor::item<int64_t>() const;
template bool Tensor::item<bool>() const;

}  // namespace uoe
