// check_memory: the tightest limit, then a binary search for the largest batch under it.
#include "nn/preflight.h"

#include <cmath>
#include <cstdio>
#include <vector>

#include "core/allocator.h"
#include "core/error.h"
#include "core/memory_limits.h"
#include "core/option_names.h"
#include "nn/data_parallel.h"

namespace uoe::nn {
namespace {

constexpr double kSpare = 0.9;

std::string size_str(double bytes) {
  char s[32];
  if (bytes >= double(1 << 30)) std::snprintf(s, sizeof s, "%.1f GiB", bytes / double(1 << 30));
  else std::snprintf(s, sizeof s, "%.0f MiB", std::ceil(bytes / double(1 << 20)));
  return s;
}

}  // namespace

void check_memory(const std::string& what, Device device, const std::string& batch_field, int64_t batch,
                  const EstimateAt& estimate, int processes_here, const std::string& skip_hint) {
  const std::vector<MemoryLimit> limits =
      device.is_cuda() ? std::vector<MemoryLimit>{{double(allocator_for(device).available(device).value()),
                                                   "the free memory of " + device.str(), false}}
                       : host_memory_limits();
  check_memory(what, limits, batch_field, batch, estimate, processes_here, skip_hint);
}

void check_memory(const std::string& what, const std::vector<MemoryLimit>& limits, const std::string& batch_field,
                  int64_t batch, const EstimateAt& estimate, int processes_here, const std::string& skip_hint) {
  // What one process may use under a limit: all of its own, a share of one the machine's processes share.
  auto share = [&](const MemoryLimit& l) { return std::max(l.room, 0.0) / (l.shared ? processes_here : 1); };
  auto fits = [&](double need) {
    for (const MemoryLimit& l : limits)
      if (need > share(l)) return false;
    return true;
  };
  const double need = estimate(batch);
  if (fits(need)) return;
  const MemoryLimit* tight = &limits.front();
  for (const MemoryLimit& l : limits)
    if (share(l) < share(*tight)) tight = &l;
  // The batch to suggest leaves a tenth of the room to what the estimate leaves out (the allocator's cached
  // blocks, thread stacks, the runtime's own memory).
  int64_t lo = 0, hi = batch;  // estimate(lo) fits (lo = 0: none known to), estimate(hi) does not
  while (hi - lo > 1) {
    const int64_t mid = lo + (hi - lo) / 2;
    (fits(estimate(mid) / kSpare) ? lo : hi) = mid;
  }
  const std::string shared = tight->shared && processes_here > 1
                                 ? " to each of the " + std::to_string(processes_here) + " ranks on this machine"
                                 : "";
  const std::string batch_name = option_name(batch_field);
  const std::string advice = lo > 0 ? batch_name + " " + std::to_string(lo) + " fits with a tenth to spare (" +
                                          size_str(estimate(lo)) + ")"
                                    : "even a batch of 1 needs " + size_str(estimate(1)) + " (a smaller model, "
                                      "shorter windows or bf16 compute would need less)";
  fail("[", what, "] this run needs about ", size_str(need), " per process at ", batch_name, " ", batch, " (the memory "
       "estimate of uoe info) but ", size_str(share(*tight)), " is available", shared, " (", tight->source, "): ",
       advice, ". ", skip_hint);
}

void check_training_memory(const ModelConfig& config, const TrainOptions& o, Communicator& comm) {
  // The processes of this run on this machine: they share its memory.
  const Tensor here = from_vector<int64_t>({comm.local_rank() + 1}, {1});
  comm.all_reduce(here, ReduceOp::Max);
  if (!o.memory_check) return;
  const EstimateAt at = [&](int64_t batch) {
    MemoryOptions m;
    m.batch = rank_rows(batch, 0, comm.size()).count;  // rank 0's rows, the most of any rank
    m.seq = o.seq;
    m.compute = o.compute_dtype.value_or(o.param_dtype);
    m.storage = o.param_dtype;
    m.checkpoint_activations = o.checkpoint_activations;
    m.optimizer = o.optimizer;
    m.ranks = comm.size();
    m.zero1 = o.zero1;
    m.expert_parallel = o.expert_parallel;
    m.grad_accum = o.grad_accum;
    return estimate_training_memory(config, m).total;
  };
  check_memory("train", o.device, "TrainOptions::batch", o.batch, at, int(here.item<int64_t>()),
               "Pass " + option_name("TrainOptions::memory_check = false") + " to start anyway");
}

}  // namespace uoe::nn
