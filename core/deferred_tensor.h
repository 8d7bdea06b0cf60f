// A tensor known by name, dtype and shape whose values are made only when needed: e.g. gathered from every rank
// at the moment a checkpoint writer reaches it, so that the writer (and every rank) holds one such tensor at a
// time instead of the whole model or optimiser state.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace uoe {

struct DeferredTensor {
  std::string name;
  DType dtype;
  Shape shape;
  std::function<Tensor()> produce;  // a tensor of that dtype and shape, on any device
};
using DeferredTensors = std::vector<DeferredTensor>;

// Tensors that exist already, deferred (producing one returns it).
inline DeferredTensors defer(const std::vector<std::pair<std::string, Tensor>>& tensors) {
  DeferredTensors out;
  for (const auto& [name, t] : tensors) out.push_back({name, t.dtype(), t.shape(), [tensor = t] { return tensor; }});
  return out;
}

// Every tensor produced, in order.
inline std::vector<std::pair<std::string, Tensor>> materialize(const DeferredTensors& tensors) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const DeferredTensor& d : tensors) out.emplace_back(d.name, d.produce());
  return out;
}

}  // namespace uoe
