// Module: named parameters and submodules with stable dotted names; train/eval; state dicts; device moves.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace uoe::nn {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

class Module {
 public:
  virtual ~Module() = default;

  // Depth-first, in registration order: "blocks.0.attn.wq.weight", ...
  NamedTensors named_parameters() const;
  std::vector<Tensor> parameters() const;
  // Parameters by dotted name.
  std::map<std::string, Tensor> state_dict() const;
  // Copies values into the module's tensors (cast to their dtype); shapes must match, a floating-point tensor takes
  // only floating-point values; strict: the key sets must match. Errors name `source` (the file) when given.
  void load_state_dict(const std::map<std::string, Tensor>& state, bool strict = true, const std::string& source = "");
  int64_t num_parameters() const;

  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves (or casts) every parameter in place: handles held by layers stay valid.
  void to(Device device);
  void to(DType dtype);
  void zero_grad();
  // Replaces the data of `param` (a handle this module registered) by `value`, which may have another shape
  // (e.g. this rank's shard of it); the handle stays valid for the layers that hold it.
  void replace_parameter(const Tensor& param, const Tensor& value);

  // Registers `t` (made a leaf that requires grad) under `name` and returns the handle to keep.
  Tensor register_parameter(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  void collect(const std::string& prefix, NamedTensors& out) const;
  NamedTensors params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

}  // namespace uoe::nn
