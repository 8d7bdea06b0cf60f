// Model accounting from a configuration alone: total and active parameters, FLOPs per token, training memory.
#pragma once
#include <string>

#include "core/dtype.h"
#include "nn/config.h"

namespace uoe::nn {

// One training step of one process, as nn::train runs it.
struct MemoryOptions {
  int64_t batch = 16;                     // rows of this process
  int64_t seq = 0;                        // tokens per row (0: the context)
  DType compute = DType::Float32;         // Float32, or BFloat16 for mixed precision (LanguageModel::compute_dtype)
  DType storage = DType::Float32;         // parameters and their gradients (the optimiser state and the
                                          // residual stream stay float32)
  bool checkpoint_activations = false;    // LanguageModel::checkpoint_activations
  std::string optimizer = "adamw";        // adamw (m and v) | sgd (momentum)
  int64_t ranks = 1;                      // processes (mpirun -np): several keep float32 gradient buckets
  bool zero1 = false;                     // ZeRO-1: the optimiser state split across the ranks (an expert
                                          // slice's across the ranks that hold it, ranks / expert_parallel)
  int64_t expert_parallel = 1;            // each rank keeps n / expert_parallel experts of every layer
  int64_t grad_accum = 1;                 // micro-batches per step (--grad-accum): from the second on, every
                                          // parameter's .grad is held through the forward and backward
};

// Bytes held at the peak of a training step (forward, backward, clipping, optimiser step), by what holds them: the
// tensor allocator's peak (the process's resident memory adds the allocator's cached free blocks and the runtime).
struct MemoryEstimate {
  double parameters = 0;
  double gradients = 0;      // .grad of the parameters (those computed when the peak is reached)
  double optimizer = 0;      // this rank's optimiser state
  double buckets = 0;        // data parallel: the gradient all-reduce buckets (float32, allocated once)
  double activations = 0;    // activations kept for backward, token ids and targets
  double weight_copies = 0;  // weights cast for compute (and float32 copies the expert kernels keep) saved for backward
  double transient = 0;      // the working set of what runs at the peak: new gradients, float32 working copies
  double total = 0;          // the sum: the allocator's peak
  std::string phase;         // where the peak falls: "the last block backward", "the embedding backward", ...
};

// The estimate counts every tensor the forward keeps for backward and the backward's working set, as this
// library's CPU ops allocate them (sizes rounded as the CPU allocator rounds them; see docs/GUIDE.md).
MemoryEstimate estimate_training_memory(const ModelConfig& c, const MemoryOptions& o = {});

// Inference without gradients on a checkpoint's model (uoe eval, sample, analyze's forwards).
struct InferenceOptions {
  int64_t batch = 1;               // rows per forward
  int64_t seq = 0;                 // tokens per row (0: the context)
  DType compute = DType::Float32;  // --dtype
  bool kv_cache = false;           // keys and values cached for the whole context (uoe sample)
};

// Bytes the tensor allocator holds at the peak: the float32 parameters and, while a checkpoint loads, its largest
// tensor; or the parameters, the cache and the largest working set of one forward, bounded by what training keeps
// of a block's attention or FFN, or of the head and loss (nn::estimate_training_memory's terms).
double estimate_inference_memory(const ModelConfig& c, const InferenceOptions& o);

// Active counts take top_k experts per token. With routing = "topp" the number varies per token (1 to n; `uoe
// analyze` reports the mean), so those counts are the top_k-expert figure, not a bound.
struct ModelCounts {
  double total = 0, active = 0;  // parameters (active: those one token uses)
  double flops = 0;              // forward FLOPs per token at full context
  double memory = 0;             // bytes to train with AdamW in float32 at batch 16 x context
                                 // (estimate_training_memory with its default options)
};

ModelCounts count_model(const ModelConfig& c);

// FLOPs of one training step per token at sequence length seq: 3 × the forward's (backward = 2 × forward), the
// active weights and causal attention at seq; activation checkpointing's recomputation not counted (model FLOPs,
// the numerator of MFU).
double training_flops_per_token(const ModelConfig& c, int64_t seq);

}  // namespace uoe::nn
