// Checkpoint history: the last N saves of a run kept as `<checkpoint>-<step>` directories beside `<checkpoint>` (the
// latest, which resume, eval, sample and analyze read). Each is a whole checkpoint, written atomically after the
// latest is complete; the oldest are removed only once the new one is in place (docs/CHECKPOINT.md).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace uoe::nn {

// "<checkpoint_dir>-<step>": where the save of `step` is kept.
std::string history_dir(const std::string& checkpoint_dir, int64_t step);

// The steps of the history directories beside `checkpoint_dir` (exactly "<name>-<digits>"), ascending.
std::vector<int64_t> checkpoint_history(const std::string& checkpoint_dir);

// After `checkpoint_dir` was saved at `step`: writes history_dir(checkpoint_dir, step) atomically with the same
// files (hard links where the file system has them, else copies; no checkpoint file is ever written in place),
// then removes the oldest history directories until `keep` remain. keep <= 0: nothing is kept or removed.
void keep_checkpoint_history(const std::string& checkpoint_dir, int64_t step, int64_t keep);

// Removes the history directories of steps after `step` (a run resumed at `step` redoes them; step < 0: every one,
// for a new run in their place). Returns the steps removed.
std::vector<int64_t> drop_checkpoint_history_after(const std::string& checkpoint_dir, int64_t step);

}  // namespace uoe::nn
