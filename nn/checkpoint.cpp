// Checkpoint directories: safetensors for tensors, JSON for configuration and trainer state.
#include "nn/checkpoint.h"

#include <sys/stat.h>

#include <sstream>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/safetensors.h"

namespace uoe::nn {
namespace {

std::map<std::string, Tensor> as_map(const safetensors::File& f) {
  std::map<std::string, Tensor> out;
  for (const auto& n : f.tensors) out[n.name] = n.tensor;
  return out;
}

bool file_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

}  // namespace

bool checkpoint_exists(const std::string& dir) {
  recover_directory(dir);
  return file_exists(dir + "/model.safetensors");
}

void save_checkpoint(const std::string& dir, const Module& model, const ModelConfig& config, const Optimizer* opt,
                     const json::Value& trainer_state, const Tokenizer& tokenizer) {
  save_checkpoint(dir, model_tensors(model), config, opt ? opt->state() : NamedTensors{}, trainer_state, tokenizer);
}

NamedTensors model_tensors(const Module& model) {
  NamedTensors tensors = model.named_parameters();
  for (auto& b : model.named_buffers()) tensors.push_back(b);
  return tensors;
}

void save_checkpoint(const std::string& dir, const NamedTensors& model, const ModelConfig& config,
                     const NamedTensors& optimizer_state, const json::Value& trainer_state, const Tokenizer& tokenizer) {
  save_checkpoint(true, dir, defer(model), config, defer(optimizer_state), trainer_state, tokenizer);
}

void save_checkpoint(bool writer, const std::string& dir, const DeferredTensors& model, const ModelConfig& config,
                     const DeferredTensors& optimizer_state, const json::Value& trainer_state,
                     const Tokenizer& tokenizer) {
  if (!writer) {
    safetensors::produce_in_save_order(model);
    safetensors::produce_in_save_order(optimizer_state);
    return;
  }
  write_directory_atomic(dir, [&](const std::string& tmp) {
    safetensors::save(tmp + "/model.safetensors", model, {{"model", config.name}});
    if (!optimizer_state.empty()) safetensors::save(tmp + "/optimizer.safetensors", optimizer_state);
    write_file_atomic(tmp + "/config.json", to_json(config).dump(2) + "\n");
    write_file_atomic(tmp + "/trainer_state.json", trainer_state.dump(2) + "\n");
    write_file_atomic(tmp + "/tokenizer.json", tokenizer.to_json().dump() + "\n");
  });
}

ModelConfig checkpoint_config(const std::string& dir) {
  UOE_CHECK(checkpoint_exists(dir), "[checkpoint] no checkpoint in '", dir, "' (missing model.safetensors)");
  return model_config_from_json(json::read_file(dir + "/config.json"), dir + "/config.json");
}

Checkpoint load_checkpoint(const std::string& dir, OptimizerState optimizer) {
  Checkpoint c;
  c.config = checkpoint_config(dir);  // first: it says when there is no checkpoint
  c.model = as_map(safetensors::load(dir + "/model.safetensors"));
  if (optimizer == OptimizerState::Load && file_exists(dir + "/optimizer.safetensors")) {
    const std::string file = dir + "/optimizer.safetensors";
    c.optimizer = as_map(safetensors::load(file));
    // What the optimisers read: a 0-dim int64 step count, floating-point moments.
    for (const auto& [name, t] : c.optimizer) {
      if (name != "step") {
        UOE_CHECK(is_floating(t.dtype()), "[checkpoint] ", file, ": '", name, "' is ", dtype_name(t.dtype()),
                  "; optimizer state is floating-point");
        continue;
      }
      std::ostringstream got;
      got << dtype_name(t.dtype()) << shape_str(t.shape());
      if (t.numel() == 1) got << " = " << t.item<double>();
      UOE_CHECK(t.dtype() == DType::Int64 && t.dim() == 0 && t.item<int64_t>() >= 0, "[checkpoint] ", file,
                ": 'step' must be a 0-dim int64 count >= 0, got ", got.str());
    }
  }
  c.trainer_state = json::read_file(dir + "/trainer_state.json");
  c.tokenizer = load_tokenizer(dir + "/tokenizer.json");
  return c;
}

}  // namespace uoe::nn
