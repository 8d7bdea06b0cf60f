// Checkpoint directories: safetensors for tensors, JSON for configuration and trainer state.
#include "nn/checkpoint.h"

#include <sys/stat.h>

#include <cmath>
#include <filesystem>
#include <sstream>
#include <vector>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/option_names.h"
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

bool entry_exists(const std::string& path) {  // a dangling link counts
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0;
}

// What is wrong with the files of a checkpoint directory ("" when nothing); optimizer.safetensors only when it is
// read: required (a run resumes from it), or there to be loaded.
std::string damage(const std::string& dir, OptimizerState optimizer) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    const std::string why = not_a_regular_file(dir);
    return "'" + dir + "' is not a directory" + (why.empty() ? std::string() : " (" + why + ")");
  }
  std::vector<std::string> files = {"model.safetensors", "config.json", "trainer_state.json", "tokenizer.json"};
  if (optimizer == OptimizerState::Require ||
      (optimizer == OptimizerState::Load && entry_exists(dir + "/optimizer.safetensors")))
    files.push_back("optimizer.safetensors");
  std::string out;
  for (const std::string& f : files)
    if (const std::string why = not_a_regular_file(dir + "/" + f); !why.empty())
      out += (out.empty() ? "" : "; ") + f + ": " + why;
  return out;
}

// What to do about a checkpoint that cannot be read whole.
std::string recovery_advice(const std::string& dir) {
  if (entry_exists(dir + ".old"))
    return ". '" + dir + ".old' holds the checkpoint before it: to go back to that one, replace '" + dir +
           "' with it (rm -r " + dir + " && mv " + dir + ".old " + dir + ")";
  return ". Restore the files from a copy of the run; or start the run afresh (" +
         option_name("TrainOptions::out_dir emptied") + ", or another " + option_name("TrainOptions::out_dir") + ")";
}

// "nan at element 17" for the first element of `t` that is not finite; "" when every one is (or t is not
// floating-point).
std::string first_non_finite(const Tensor& t) {
  if (!is_floating(t.dtype())) return "";
  const Tensor wide = t.to(t.dtype() == DType::Float64 ? DType::Float64 : DType::Float32).contiguous();
  const auto scan = [&](const auto* p) {
    const int64_t n = wide.numel();
    int64_t first = n;
#pragma omp parallel for reduction(min : first)
    for (int64_t i = 0; i < n; ++i)
      if (!std::isfinite(p[i]) && i < first) first = i;
    std::ostringstream s;
    if (first < n) s << p[first] << " at element " << first;
    return s.str();
  };
  return wide.dtype() == DType::Float64 ? scan(wide.data_ptr<double>()) : scan(wide.data_ptr<float>());
}

// Weights or optimiser moments that are not finite: a damaged file (a run never saves them so), which would
// otherwise surface as a NaN loss.
void check_finite(const std::map<std::string, Tensor>& tensors, const std::string& file, const std::string& dir) {
  for (const auto& [name, t] : tensors)
    if (const std::string where = first_non_finite(t); !where.empty())
      fail("[checkpoint] ", file, ": the tensor '", name, "' holds a value that is not finite (", where,
           "): the checkpoint is damaged", recovery_advice(dir));
}

// Finishes an interrupted checkpoint write, except where `dir` is there but damaged beside a `dir`.old: then the
// old copy is kept for the user to go back to (recovery would remove it as the leftover of a completed write).
void recover_checkpoint(const std::string& dir) {
  if (entry_exists(dir) && entry_exists(dir + ".old") && !damage(dir, OptimizerState::Skip).empty()) return;
  recover_directory(dir);
}

}  // namespace

bool checkpoint_exists(const std::string& dir) {
  recover_checkpoint(dir);
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0) return false;
  std::error_code ec;
  return !S_ISDIR(st.st_mode) || !std::filesystem::is_empty(dir, ec) || ec;
}

void check_checkpoint(const std::string& dir, OptimizerState optimizer) {
  const std::string what = damage(dir, optimizer);
  UOE_CHECK(what.empty(), "[checkpoint] the checkpoint in '", dir, "' cannot be read whole: ", what,
            recovery_advice(dir));
}

void save_checkpoint(const std::string& dir, const Module& model, const ModelConfig& config, const Optimizer* opt,
                     const json::Value& trainer_state, const Tokenizer& tokenizer) {
  save_checkpoint(dir, model_tensors(model), config, opt ? opt->state() : NamedTensors{}, trainer_state, tokenizer);
}

NamedTensors model_tensors(const Module& model) { return model.named_parameters(); }

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
  UOE_CHECK(checkpoint_exists(dir), "[checkpoint] no checkpoint in '", dir, "' (nothing there)");
  return model_config_from_json(json::read_file(dir + "/config.json"), dir + "/config.json");
}

Checkpoint load_checkpoint(const std::string& dir, OptimizerState optimizer) {
  UOE_CHECK(checkpoint_exists(dir), "[checkpoint] no checkpoint in '", dir, "' (nothing there)");
  check_checkpoint(dir, optimizer);
  Checkpoint c;
  c.config = checkpoint_config(dir);  // first: it says when there is no checkpoint
  c.model = as_map(safetensors::load(dir + "/model.safetensors"));
  check_finite(c.model, dir + "/model.safetensors", dir);
  if (optimizer != OptimizerState::Skip && file_exists(dir + "/optimizer.safetensors")) {
    const std::string file = dir + "/optimizer.safetensors";
    c.optimizer = as_map(safetensors::load(file));
    check_finite(c.optimizer, file, dir);
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
