// Memory preflight: before a command allocates, its memory estimate (nn/accounting.h) against what this process
// may use (core/memory_limits.h on the CPU, the free memory of its GPU), so that a run too large for the machine
// is refused at once, with the estimate, the limit and the largest batch that fits, instead of growing until the
// OOM killer ends it.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/device.h"
#include "core/memory_limits.h"
#include "nn/accounting.h"
#include "nn/trainer.h"

namespace uoe::nn {

// The bytes one process needs at a batch of `batch` rows.
using EstimateAt = std::function<double(int64_t batch)>;

// Raises "[<what>] ..." when estimate(batch) does not fit on `device`: on a GPU its free memory; on the CPU every
// limit of host_memory_limits(), those the machine's processes share counted for `processes_here` processes of
// this run. The error gives the estimate, the limit and its source, the largest batch in [1, batch) that fits
// (or says none does), naming the batch by `batch_field` (the caller's option, e.g. "TrainOptions::batch", through
// option_name()), and `skip_hint`, how to start anyway.
void check_memory(const std::string& what, Device device, const std::string& batch_field, int64_t batch,
                  const EstimateAt& estimate, int processes_here, const std::string& skip_hint);
// The same against the given limits.
void check_memory(const std::string& what, const std::vector<MemoryLimit>& limits, const std::string& batch_field,
                  int64_t batch, const EstimateAt& estimate, int processes_here, const std::string& skip_hint);

// nn::train's check (options.memory_check): the training estimate of rank 0's rows of the batch, for the ranks
// of `comm` on this machine (a collective of every rank, whether it checks or not).
void check_training_memory(const ModelConfig& config, const TrainOptions& options, Communicator& comm);

}  // namespace uoe::nn
