// A rank that fails in the middle of a data-parallel step, while the other ranks go on and wait for its buckets:
// it throws from a gradient hook during backward (run_or_abort must end them all), or it stops answering (sleeps;
// the collective watchdog of the others must end the run).
#include <chrono>
#include <filesystem>
#include <thread>

#include "core/collective_watchdog.h"
#include "core/error.h"
#include "dist_helpers.h"
#include "fixtures.h"
#include "nn/data_parallel.h"

namespace uoe::test {

int run_failing_steps(Communicator& comm, int failing_rank, bool stall) {
  if (stall) watchdog::set_timeout(2);
  const std::string dir = shared_dir("failing_rank");
  if (comm.rank() == 0) micro_data(dir);
  comm.barrier();
  const nn::TokenDataset data(std::make_shared<nn::TokenFile>(dir + "/tokens.bin"));
  // This run ends in an abort, which skips temp_dir's removal at exit: every rank has its tokens now.
  comm.barrier();
  if (comm.rank() == 0) std::filesystem::remove_all(dir);
  auto model = micro_model(0);
  const nn::RowRange rows = nn::rank_rows(4, comm.rank(), comm.size());
  nn::DataParallel dp(model->named_parameters(), comm, double(rows.count) / 4, 1024);
  for (int64_t step = 0; step < 3; ++step) {
    if (step == 1 && comm.rank() == failing_rank && stall) std::this_thread::sleep_for(std::chrono::seconds(60));
    if (step == 1 && comm.rank() == failing_rank && !stall)
      model->blocks[0]->attn_norm->weight.register_hook([](const Tensor&) -> Tensor {
        fail("injected failure in the backward of step 1");
      });
    model->zero_grad();
    dp.reduce_next_backward();
    backward_on_rows(*model, data.train_batch(0, uint64_t(step), 4, 16), rows.begin, rows.count);
    dp.finish();
  }
  return 0;
}

}  // namespace uoe::test
