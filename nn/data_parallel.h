// Data parallel training: each rank's share of a batch, and gradients averaged across the ranks in buckets whose
// all-reduces start while backward is still running.
#pragma once
#include <memory>

#include "core/communicator.h"
#include "nn/module.h"

namespace uoe::nn {

// Rows [begin, begin + count) of a global batch of `batch` rows computed by rank `rank` of `size`: the balanced
// split [rank·batch/size, (rank+1)·batch/size), so the ranks together cover the batch once, in order.
struct RowRange {
  int64_t begin = 0, count = 0;
};
RowRange rank_rows(int64_t batch, int rank, int size);

// Averages the gradients of `params` over the ranks of `comm`, overlapping the communication with backward.
//
// The parameters are grouped into buckets of about bucket_bytes, in reverse registration order (roughly the
// order backward finishes their gradients). During the backward armed by reduce_next_backward(), a hook on each
// parameter copies its finished gradient (its .grad plus the incoming contribution) into its slot of the
// bucket; when a bucket is complete, and every bucket before it has started (all ranks start them in the same
// order), its non-blocking all-reduce starts while backward goes on. finish() starts what is left, waits, and
// points every .grad at its slot: Σ_r weight_r · grad_r, with weight_r rank r's share of the global batch
// (its rows / all rows), which is the gradient of the mean loss over the global batch.
class DataParallel {
 public:
  static constexpr int64_t kDefaultBucketBytes = int64_t(25) << 20;

  // Broadcasts every parameter from rank 0 first, so that all ranks start from the same values.
  DataParallel(const NamedTensors& params, Communicator& comm, double weight,
               int64_t bucket_bytes = kDefaultBucketBytes);
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  // The next backward brings the step's last gradient contribution (backward passes before it, e.g. earlier
  // micro-batches of gradient accumulation, only accumulate into .grad on this rank).
  void reduce_next_backward();
  // After that backward: starts the buckets it left incomplete (a parameter it gave no gradient contributes
  // zeros), waits for every bucket, and sets each parameter's .grad to its averaged gradient (a view into the
  // bucket, valid until the next finish(); bfloat16 parameters' gradients are summed in float32 buckets and get a
  // bfloat16 copy). A parameter that no rank gave a gradient in this step keeps none (undefined .grad), as in one
  // process. A parameter that only some ranks give a gradient starts its bucket at different points on different
  // ranks; on GPUs, whose NCCL collectives share one stream per device in issue order, that can deadlock against
  // other collectives issued during backward (expert parallelism's all-to-alls). No shipped model has one.
  void finish();
  int64_t bucket_count() const;

 private:
  struct State;
  std::shared_ptr<State> state_;  // the hooks hold it weakly: they do nothing once this object is gone
};

}  // namespace uoe::nn
