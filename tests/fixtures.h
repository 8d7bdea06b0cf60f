// Shared test fixtures: scratch directories, a micro model configuration, a small learnable text,
// and running the uoe program.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/json.h"
#include "nn/config.h"
#include "nn/dataset.h"
#include "nn/trainer.h"

namespace uoe::test {

// A fresh empty directory under the test temp dir, unique to this process and name. It is removed when the
// process exits, unless a test failed (then its path is printed, and it stays for inspection).
std::string temp_dir(const std::string& name);

// A 2-layer, d = 32 model of the given FFN kind (4 experts, top-2, D = 32, r = 8): trains in milliseconds.
nn::ModelConfig micro_config(nn::FfnKind kind);

// Writes dir/text.txt (a text with structure to learn) and its byte tokens dir/tokens.bin.
std::shared_ptr<nn::TokenDataset> micro_data(const std::string& dir);

// Runs a shell command; returns its stdout and stderr together and sets *code to its exit status.
std::string run_command(const std::string& cmd, int* code);

// Training options for the micro model into `out`: batch 4 x 32, lr 3e-3 after 2 warm-up steps, evaluation
// (2 batches) only at the end, no progress bar.
nn::TrainOptions micro_train_options(const std::string& out, int64_t steps);

// The lines of out/metrics.jsonl, parsed.
std::vector<json::Value> metric_lines(const std::string& out);

}  // namespace uoe::test
