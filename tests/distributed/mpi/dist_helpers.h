// Helpers of the tests that run under mpirun: a directory all ranks share, tensor comparison, a micro language model
// step on one rank's rows of a batch.
#pragma once
#include <string>

#include "core/communicator.h"
#include "nn/dataset.h"
#include "nn/transformer.h"

namespace uoe::test {

// A fresh directory that every rank of world() names the same way; rank 0 creates it, empty.
std::string shared_dir(const std::string& name);

// max |a - b| / max(max |b|, 1e-12) over two tensors of one shape.
double max_rel_diff(const Tensor& a, const Tensor& b);

// The micro UoE model of fixtures.h, built from `seed`.
std::unique_ptr<nn::LanguageModel> micro_model(uint64_t seed);

// Forward and backward of `model` on rows [begin, begin + count) of `b`; the loss is scaled by `scale` (gradient
// accumulation). Returns the cross-entropy of those rows.
double backward_on_rows(nn::LanguageModel& model, const nn::Batch& b, int64_t begin, int64_t count, double scale = 1.0);

}  // namespace uoe::test
