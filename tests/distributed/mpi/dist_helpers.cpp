// Helpers of the tests that run under mpirun.
#include "dist_helpers.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "core/rng.h"
#include "fixtures.h"

namespace uoe::test {

std::string shared_dir(const std::string& name) {
  Communicator& comm = world();
  const Tensor pid = from_vector<int64_t>({int64_t(::getpid())}, {1});
  comm.broadcast(pid, 0);
  // temp_dir's own naming, with rank 0's process id
  const std::string dir = ::testing::TempDir() + "uoe_" + name + "_" + std::to_string(pid.item<int64_t>());
  if (comm.rank() == 0) {
    EXPECT_EQ(temp_dir(name), dir);
  }
  comm.barrier();
  return dir;
}

double max_rel_diff(const Tensor& a, const Tensor& b) {
  const std::vector<double> x = a.to(DType::Float64).to_vector<double>(), y = b.to(DType::Float64).to_vector<double>();
  EXPECT_EQ(x.size(), y.size());
  double diff = 0, scale = 1e-12;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    diff = std::max(diff, std::abs(x[i] - y[i]));
    scale = std::max(scale, std::abs(y[i]));
  }
  return diff / scale;
}

std::unique_ptr<nn::LanguageModel> micro_model(uint64_t seed) {
  manual_seed(seed);
  return std::make_unique<nn::LanguageModel>(micro_config(nn::FfnKind::UoE));
}

double backward_on_rows(nn::LanguageModel& model, const nn::Batch& b, int64_t begin, int64_t count, double scale) {
  const Tensor x = b.x.narrow(0, begin, count).contiguous(), y = b.y.narrow(0, begin, count).contiguous();
  Tensor loss = model.loss(x, y);
  if (scale != 1.0) loss = loss * scale;
  loss.backward();
  return model.last_ce.item<double>();
}

}  // namespace uoe::test
