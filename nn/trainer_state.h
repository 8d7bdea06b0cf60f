// The trainer's state in a checkpoint (trainer_state.json): where a resumed run continues its steps, its data
// stream and its random generator.
#pragma once
#include <cstdint>
#include <string>

#include "core/json.h"

namespace uoe::nn {

struct TrainerState {
  int64_t step = 0;         // steps completed
  int64_t tokens_seen = 0;  // training tokens of those steps
  uint64_t seed = 0;        // the data stream's seed: micro-batch i is the (seed, i) window draw
  int64_t data_cursor = 0;  // micro-batches drawn so far
  uint64_t rng_seed = 0, rng_offset = 0;  // the default generator (initialisation, dropout)
  std::string init_from;    // the checkpoint a fine-tuning run started from; empty: none
  // The schedule, for readers: a resumed run takes its own from its flags.
  double lr = 0;
  int64_t warmup = 0, total_steps = 0;
};

json::Value to_json(const TrainerState& s);
// Every field that a resume reads must be there with its type, and the counts (step, tokens_seen, data_cursor)
// >= 0; else one error naming `file` and the field (a negative step resumed "at step -1" and dropped the metrics).
TrainerState trainer_state_from_json(const json::Value& v, const std::string& file);
// trainer_state_from_json of checkpoint_dir/trainer_state.json.
TrainerState read_trainer_state(const std::string& checkpoint_dir);

}  // namespace uoe::nn
