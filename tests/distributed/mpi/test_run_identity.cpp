// Under mpirun: strings of different lengths gathered from every rank, and nn::train started with a setting that
// differs on one rank, which every rank refuses with the same error naming it (before any other collective, so
// nothing truncates or hangs).
#include <gtest/gtest.h>

#include "core/string_collectives.h"
#include "dist_helpers.h"
#include "fixtures.h"
#include "nn/trainer.h"

namespace uoe::nn {
namespace {

TEST(Collectives, StringsOfDifferentLengthsReachEveryRank) {
  Communicator& comm = world();
  auto text_of = [](int r) { return std::string(size_t(r) * 13, char('a' + r)) + (r % 2 ? std::string(1, '\0') : ""); };
  const std::vector<std::string> all = all_gather_strings(comm, text_of(comm.rank()));
  ASSERT_EQ(all.size(), size_t(comm.size()));
  for (int r = 0; r < comm.size(); ++r) EXPECT_EQ(all[size_t(r)], text_of(r)) << "rank " << r;
}

TEST(DistributedTraining, RanksStartedWithDifferentSettingsAllRefuseNamingThem) {
  Communicator& comm = world();
  const std::string dir = test::shared_dir("identity_ranks");
  if (comm.rank() == 0) test::micro_data(dir);
  comm.barrier();
  const TokenDataset data(std::make_shared<TokenFile>(dir + "/tokens.bin"));
  TrainOptions o = test::micro_train_options(dir + "/run", 2);
  if (comm.rank() == 1) {
    o.batch = 2;
    o.zero1 = true;
  }
  try {
    train(test::micro_config(FfnKind::UoE), o, data, *make_byte_tokenizer());
    FAIL() << "rank " << comm.rank() << " trained";
  } catch (const CollectiveError& e) {
    EXPECT_NE(std::string(e.what()).find("[train] the " + std::to_string(comm.size()) + " ranks were not started "
                                         "with the same run: rank 1 differs in TrainOptions::batch (2 there, 4 on "
                                         "rank 0), TrainOptions::zero1 (true there, false on rank 0)"),
              std::string::npos) << e.what();
  }
  comm.barrier();  // every rank is still here: none was left in a collective
}

}  // namespace
}  // namespace uoe::nn
