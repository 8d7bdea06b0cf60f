// world(): a launched process joins the MPI world (CPU tensors over MPI, CUDA tensors over NCCL); a process
// started directly is a world of one.
#include <cstdlib>
#include <string>
#include <utility>

#include "core/collective_checks.h"
#include "core/communicator.h"
#include "core/error.h"

namespace uoe {
namespace {

GpuCommunicatorMaker g_make_gpu_communicator = nullptr;  // the CUDA backend's NCCL communicator, when built with it

// The launcher's variable that marks this process as one rank of a parallel run, or null: OpenMPI's mpirun,
// PMI launchers (MPICH's hydra, Slurm's srun --mpi=pmi2) and PMIx launchers (srun --mpi=pmix, prterun).
const char* launcher_variable() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"})
    if (std::getenv(name)) return name;
  return nullptr;
}

// Routes each collective by device: CPU tensors to the host communicator (MPI), CUDA tensors to NCCL (built on
// first use, for the device of that first tensor: one GPU per rank).
class WorldCommunicator final : public Communicator {
 public:
  explicit WorldCommunicator(std::unique_ptr<Communicator> host) : host_(std::move(host)) {}
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  int local_rank() const override { return host_->local_rank(); }
  void all_reduce(const Tensor& t, ReduceOp op) override { on(t, "all_reduce").all_reduce(t, op); }
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    return on(t, "all_reduce").all_reduce_async(t, op);
  }
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    on(input, "reduce_scatter").reduce_scatter(input, output, op);
  }
  void all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows) override {
    on(input, "all_gather").all_gather(input, output, rows);
  }
  void all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                  const std::vector<int64_t>& recv_rows) override {
    on(input, "all_to_all").all_to_all(input, send_rows, output, recv_rows);
  }
  void broadcast(const Tensor& t, int root) override { on(t, "broadcast").broadcast(t, root); }
  void barrier() override { host_->barrier(); }
  // The group's MPI communicator, and its own NCCL communicator once it meets a CUDA tensor.
  std::unique_ptr<Communicator> split(int color, int key) override {
    return std::make_unique<WorldCommunicator>(host_->split(color, key));
  }

 protected:
  void abort_all(int exit_code) override { host_->abort(exit_code); }

 private:
  Communicator& on(const Tensor& t, const char* op) {
    if (!t.defined() || t.is_cpu()) return *host_;
    if (!gpu_) {
      UOE_CHECK(g_make_gpu_communicator, collective::where(*this, op), "the tensor is on ", t.device().str(),
                " but this build has no NCCL (configure with CUDA and NCCL found, or keep the tensors on the CPU)");
      gpu_ = g_make_gpu_communicator(*host_, t.device().index);
      gpu_device_ = t.device().index;
    }
    UOE_CHECK(t.device().index == gpu_device_, collective::where(*this, op), "the tensor is on ", t.device().str(),
              " but this rank's NCCL communicator is on cuda:", gpu_device_, " (one GPU per rank)");
    return *gpu_;
  }

  std::unique_ptr<Communicator> host_;
  std::unique_ptr<Communicator> gpu_;  // declared after host_: destroyed before MPI is finalised
  int gpu_device_ = -1;
};

std::unique_ptr<Communicator> make_world() {
  const char* launched = launcher_variable();
  if (!launched) return std::make_unique<LocalCommunicator>();
#if UOE_WITH_MPI
  return route_by_device(make_mpi_communicator());
#else
  const char* size = std::getenv("OMPI_COMM_WORLD_SIZE") ? std::getenv("OMPI_COMM_WORLD_SIZE") : std::getenv("PMI_SIZE");
  if (size && std::string(size) == "1") return std::make_unique<LocalCommunicator>();
  fail("[world] this process was started by a parallel launcher (", launched, " is set) but uoe was built without ",
       "MPI: install an MPI (Debian: openmpi-bin libopenmpi-dev) and reconfigure, or run it without the launcher");
#endif
}

}  // namespace

void register_gpu_communicator(GpuCommunicatorMaker make) { g_make_gpu_communicator = make; }

std::unique_ptr<Communicator> route_by_device(std::unique_ptr<Communicator> host) {
  return std::make_unique<WorldCommunicator>(std::move(host));
}

Communicator& world() {
  static const std::unique_ptr<Communicator> w = make_world();
  return *w;
}

}  // namespace uoe
