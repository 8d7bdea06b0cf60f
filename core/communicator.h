// Communicator: collectives across the processes of a run (all_reduce, reduce_scatter, all_gather, all_to_all,
// broadcast, barrier), the world of this process, and ending every rank when one fails.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"

namespace uoe {

enum class ReduceOp { Sum, Max };

// The dtype values of dtype t are summed in across ranks: float32 for the reduced floats (more exact, and MPI has
// no bfloat16 sum), otherwise t.
inline DType reduction_dtype(DType t) { return is_reduced_float(t) ? DType::Float32 : t; }

// A collective started by an *_async call. The tensors it uses must stay untouched until it has completed.
class Work {
 public:
  virtual ~Work() = default;
  // Blocks until the result is in place (on a GPU: until work queued afterwards on the current stream sees it).
  virtual void wait() = 0;
  // Drives the collective forward without blocking; true once it has completed.
  virtual bool test() = 0;
};

// The processes ("ranks") of one run. Every rank must call the same collectives in the same order with tensors of
// the same dtype and device and matching shapes; tensors must be contiguous. Collectives write their outputs in
// place. On a GPU they are stream-ordered: queued on the current stream, whose later work sees the results.
// Errors name the collective and the rank: "[all_gather] rank 1 of 2: ...".
class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Rank among the processes of this node (which GPU this rank uses).
  virtual int local_rank() const = 0;

  // Every rank's `t` becomes the element-wise reduction of all ranks' `t`.
  virtual void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  // all_reduce that returns at once; the result is in `t` once the Work has completed.
  virtual std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum) = 0;
  // input [size·n, ...] -> output [n, ...]: rank r receives the reduction of every rank's rows [r·n, (r+1)·n).
  virtual void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum) = 0;
  // Rank j contributes rows[j] rows (its input is [rows[j], ...]); output [Σ rows, ...] holds them in rank order.
  // Empty `rows`: every rank contributes output.size(0) / size rows. The input may be this rank's own rows of
  // the output (an in-place gather).
  virtual void all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows = {}) = 0;
  // Uneven all-to-all along dim 0: the input's rows go in rank order, send_rows[j] of them to rank j; the output
  // receives recv_rows[j] rows from rank j, in rank order. recv_rows[j] must equal rank j's send_rows[rank].
  virtual void all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                          const std::vector<int64_t>& recv_rows) = 0;
  // Every rank's `t` becomes rank `root`'s.
  virtual void broadcast(const Tensor& t, int root) = 0;
  // Returns once every rank has entered it.
  virtual void barrier() = 0;
  // Collective: a new communicator of the ranks that passed the same `color` (>= 0), ranked by `key`, then by
  // rank here. Used for groups inside the world, e.g. the ranks that share their experts (expert parallelism).
  virtual std::unique_ptr<Communicator> split(int color, int key) = 0;
  // Terminates every process of the run at once with `exit_code` (no cleanup, no destructors).
  [[noreturn]] void abort(int exit_code);

 protected:
  // Ends the other ranks (this process exits right after).
  virtual void abort_all(int exit_code) = 0;
};

// A world of one process: collectives copy their input to their output (or do nothing); any device.
class LocalCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  int local_rank() const override { return 0; }
  void all_reduce(const Tensor& t, ReduceOp op = ReduceOp::Sum) override;
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op = ReduceOp::Sum) override;
  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op = ReduceOp::Sum) override;
  void all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows = {}) override;
  void all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                  const std::vector<int64_t>& recv_rows) override;
  void broadcast(const Tensor& t, int root) override;
  void barrier() override {}
  std::unique_ptr<Communicator> split(int color, int key) override;

 protected:
  void abort_all(int) override {}
};

// All processes of this run. Started by a launcher (OpenMPI's mpirun: OMPI_COMM_WORLD_SIZE; PMI or PMIx launchers
// such as Slurm's srun: PMI_SIZE, PMIX_RANK), the first call initialises MPI (MPI_Finalize runs at exit): CPU
// tensors go through MPI, CUDA tensors through NCCL (one GPU per rank; created on first use, its id exchanged
// over MPI). Started directly, it is a LocalCommunicator. A build without MPI raises when launched as one of
// several processes.
Communicator& world();

// An error that every rank raises alike, having learnt it from the same collective (e.g. ranks started with
// different settings): no rank is left waiting in a collective, so none needs ending.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

// Runs `body`. If it throws while `comm` has several ranks, prints "<what>: rank r of N: <error>" on stderr and
// ends every rank (comm.abort(1)), so that no rank waits forever in a collective the failed one will never
// join; a CollectiveError, which every rank raises, is printed and returns 1 on each instead. With one rank the
// exception propagates.
int run_or_abort(Communicator& comm, const std::string& what, const std::function<int()>& body);

// The MPI backend behind world(), compiled only when MPI was found (UOE_WITH_MPI).
std::unique_ptr<Communicator> make_mpi_communicator();  // MPI_COMM_WORLD; initialises MPI
// How world() makes its communicator for the CUDA tensors of `device`, its id sent over `bootstrap`: installed at
// start-up by the CUDA backend of a build with NCCL (cuda/nccl_communicator.h), as it installs its allocator.
using GpuCommunicatorMaker = std::unique_ptr<Communicator> (*)(Communicator& bootstrap, int device);
void register_gpu_communicator(GpuCommunicatorMaker make);
// The ranks of `host` with collectives routed by device, as world() routes them under a launcher: CPU tensors
// through `host`, CUDA tensors through the communicator registered above (made over `host` on first use; an error
// in a build without NCCL).
std::unique_ptr<Communicator> route_by_device(std::unique_ptr<Communicator> host);

}  // namespace uoe
