// The one-process communicator (collectives are copies) and run_or_abort, which ends every rank when one fails.
#include "core/communicator.h"

#include <cstdio>
#include <cstdlib>

#include "core/collective_checks.h"
#include "core/device_copy.h"

namespace uoe {
namespace {

// The Work of a collective that finished when it was started.
class CompletedWork final : public Work {
 public:
  void wait() override {}
  bool test() override { return true; }
};

// dst = src, both contiguous of one dtype and device (checked by the collective), without autograd bookkeeping:
// collectives write data, not graph.
void copy_data(const Communicator& c, const char* op, const Tensor& dst, const Tensor& src) {
  if (dst.raw_data() == src.raw_data()) return;  // an in-place collective
  UOE_CHECK(dst.numel() == src.numel(), collective::where(c, op), "the input ", shape_str(src.shape()),
            " and the output ", shape_str(dst.shape()), " of a one-rank collective must hold as many elements");
  copy_across_devices(dst.raw_data(), dst.device(), src.raw_data(), src.device(), size_t(src.numel()) * src.itemsize());
  dst.bump_version();
}

}  // namespace

void LocalCommunicator::all_reduce(const Tensor& t, ReduceOp) { collective::check_tensor(*this, "all_reduce", t); }

std::unique_ptr<Work> LocalCommunicator::all_reduce_async(const Tensor& t, ReduceOp op) {
  all_reduce(t, op);
  return std::make_unique<CompletedWork>();
}

void LocalCommunicator::reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp) {
  collective::check_reduce_scatter(*this, input, output);
  copy_data(*this, "reduce_scatter", output, input);
}

void LocalCommunicator::all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows) {
  collective::gather_rows(*this, input, output, rows);
  copy_data(*this, "all_gather", output, input);
}

void LocalCommunicator::all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                                   const std::vector<int64_t>& recv_rows) {
  collective::check_all_to_all(*this, input, send_rows, output, recv_rows);
  copy_data(*this, "all_to_all", output, input);
}

void LocalCommunicator::broadcast(const Tensor& t, int root) {
  collective::check_tensor(*this, "broadcast", t);
  collective::check_root(*this, "broadcast", root);
}

std::unique_ptr<Communicator> LocalCommunicator::split(int color, int) {
  UOE_CHECK(color >= 0, collective::where(*this, "split"), "the color must be >= 0, got ", color);
  return std::make_unique<LocalCommunicator>();
}

void Communicator::abort(int exit_code) {
  std::fflush(nullptr);
  abort_all(exit_code);
  std::_Exit(exit_code);
}

int run_or_abort(Communicator& comm, const std::string& what, const std::function<int()>& body) {
  if (comm.size() == 1) return body();
  try {
    return body();
  } catch (const CollectiveError& e) {
    std::fprintf(stderr, "%s: rank %d of %d: %s\n", what.c_str(), comm.rank(), comm.size(), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: rank %d of %d: %s\n", what.c_str(), comm.rank(), comm.size(), e.what());
    comm.abort(1);
  }
}

}  // namespace uoe
