// Checkpoints: a directory with model.safetensors, optimizer.safetensors, config.json,
// trainer_state.json and tokenizer.json, written atomically (see docs/CHECKPOINT.md).
#pragma once
#include <map>
#include <memory>
#include <string>

#include "core/json.h"
#include "nn/config.h"
#include "nn/module.h"
#include "nn/optim.h"
#include "nn/tokenizer.h"

namespace uoe::nn {

void save_checkpoint(const std::string& dir, const Module& model, const ModelConfig& config, const Optimizer* opt,
                     const json::Value& trainer_state, const Tokenizer& tokenizer);
// The same with the model's tensors and the optimiser state given (e.g. gathered from every rank by a
// collective); no optimiser file when the state is empty.
void save_checkpoint(const std::string& dir, const NamedTensors& model, const ModelConfig& config,
                     const NamedTensors& optimizer_state, const json::Value& trainer_state, const Tokenizer& tokenizer);
// The same, collectively: every rank of a run calls it with the same deferred tensors (e.g. gathered across the
// ranks when produced, one at a time); the `writer` rank writes the checkpoint, the others produce each tensor
// in the same order and drop it.
void save_checkpoint(bool writer, const std::string& dir, const DeferredTensors& model, const ModelConfig& config,
                     const DeferredTensors& optimizer_state, const json::Value& trainer_state,
                     const Tokenizer& tokenizer);
// A module's parameters, as a checkpoint stores them.
NamedTensors model_tensors(const Module& model);

struct Checkpoint {
  ModelConfig config;
  std::map<std::string, Tensor> model;
  std::map<std::string, Tensor> optimizer;  // empty when the checkpoint has none
  json::Value trainer_state;
  std::unique_ptr<Tokenizer> tokenizer;
};

// Whether load_checkpoint reads optimizer.safetensors: evaluation, sampling and analysis skip it (under AdamW it
// is twice the model's size); Load reads it when it is there, Require (a run resuming) refuses a checkpoint
// without it.
enum class OptimizerState { Load, Require, Skip };

// Reads a checkpoint directory (finishing an interrupted atomic write first) after check_checkpoint; errors name
// the file. Weights or optimiser state that are not finite are an error naming the tensor (a damaged file).
Checkpoint load_checkpoint(const std::string& dir, OptimizerState optimizer = OptimizerState::Load);
// Whether `dir` holds a checkpoint, whole or damaged: anything in it, or anything but a directory at that path (a
// file, a dangling link). Finishes an interrupted write first. Only false is a place with no run to resume.
bool checkpoint_exists(const std::string& dir);
// Every file that load_checkpoint reads is a regular file, else one error listing what is wrong with each
// (missing, a dangling link, a loop of links, a FIFO, ...) and how to recover (`dir`.old when there is one).
void check_checkpoint(const std::string& dir, OptimizerState optimizer = OptimizerState::Load);
// The model configuration of a checkpoint (its config.json alone; an error when there is no checkpoint).
ModelConfig checkpoint_config(const std::string& dir);

}  // namespace uoe::nn
