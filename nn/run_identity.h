// Run identity: everything that defines a training run (model, tokenizer, data, batch and schedule, optimiser,
// seed, dtypes, ranks and their layout), as one JSON object. nn::train records it in every checkpoint
// (trainer_state.json "run"), compares it across the ranks before their first collective, and compares a
// resumed run's with its checkpoint's, so that a run whose ranks or restarts disagree stops at once, saying
// which settings differ, instead of crashing, hanging or training something else without a word.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/communicator.h"
#include "core/json.h"
#include "nn/dataset.h"
#include "nn/trainer.h"

namespace uoe::nn {

// The identity of the run nn::train starts with these arguments over `ranks` ranks. Its keys are `uoe train`'s
// flags ("lr", "grad-accum", ...) and "model" (config.json without the name), "tokenizer" and "data" (the file
// the tokens come from, options.data_file or the token file: its size and hash, see core/file_digest.h).
json::Value run_identity(const ModelConfig& config, const TrainOptions& options, const Tokenizer& tokenizer,
                         const TokenDataset& data, int ranks);

// The identity recorded in the checkpoint in `dir`. A checkpoint saved before identities were recorded gives
// what it has (model, tokenizer, seed, steps, warmup) and *complete = false.
json::Value recorded_identity(const std::string& dir, bool* complete = nullptr);

// Collective, and the run's first: rank 0's identity (with `start`, the step each rank starts at, and the
// --init-from checkpoint) against every other rank's. Made of fixed-size collectives, so differing ranks can
// neither crash nor hang in it; if any rank differs, every rank raises the same CollectiveError listing each
// differing field of each rank with both values.
void check_same_run_on_every_rank(const json::Value& identity, int64_t start, const std::string& init_from,
                                  Communicator& comm);

// A resumed run's identity (`now`) against its checkpoint's in `ckpt_dir`: a model, tokenizer, data, optimizer or
// seed that differs is refused; a schedule or batch setting unless `allowed` names it (--allow-change); the rank
// layout may change. Returns the notes to print: each change made, what it breaks, an older checkpoint.
std::vector<std::string> check_resumed_run(const json::Value& now, const std::string& ckpt_dir,
                                           const std::vector<std::string>& allowed);

// `uoe train --resume`: each setting whose flag was not given (`given(flag)` false) takes the value `recorded`
// holds, so that a restart needs no flag repeated to stay bit-exact.
void adopt_recorded_settings(TrainOptions& options, const json::Value& recorded,
                             const std::function<bool(const std::string&)>& given);

// The settings --allow-change accepts, comma-separated, as the error for any other lists them.
std::vector<std::string> parse_allowed_changes(const std::string& list);

}  // namespace uoe::nn
