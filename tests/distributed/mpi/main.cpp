// uoe_dist_tests: GoogleTest under `mpirun -np N`. Every rank runs every test (the collectives inside need all of
// them); rank 0 prints the report, the other ranks print only their failures, tagged with their rank.
// With --fail-on-rank=R it instead runs data-parallel steps in which rank R throws during backward, with
// --stall-on-rank=R steps in which rank R stops answering for a minute (see failing_rank.cpp).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "core/communicator.h"

namespace uoe::test {
int run_failing_steps(Communicator& comm, int failing_rank, bool stall);
}

namespace {

// Prints the failed assertions of a rank other than 0.
class RankFailurePrinter : public ::testing::EmptyTestEventListener {
 public:
  explicit RankFailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (!r.failed()) return;
    std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?", r.line_number(),
                 r.summary());
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  uoe::Communicator& comm = uoe::world();
  for (int i = 1; i < argc; ++i)
    for (const std::string flag : {"--fail-on-rank=", "--stall-on-rank="})
      if (std::string(argv[i]).rfind(flag, 0) == 0)
        return uoe::run_or_abort(comm, "uoe_dist_tests", [&] {
          return uoe::test::run_failing_steps(comm, std::stoi(std::string(argv[i]).substr(flag.size())),
                                              flag == "--stall-on-rank=");
        });
  if (comm.rank() != 0) {
    ::testing::TestEventListeners& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailurePrinter(comm.rank()));
  }
  return RUN_ALL_TESTS();
}
