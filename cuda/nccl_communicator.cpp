// NCCL backend: collectives on CUDA tensors of one GPU per rank; the NCCL unique id travels over the bootstrap
// (MPI) communicator. Calls are queued on the current stream; all_reduce_async runs on a stream of its own.
#include <nccl.h>

#include <cstring>

#include "core/collective_checks.h"
#include "core/communicator.h"
#include "cuda/check.h"
#include "cuda/stream.h"

namespace uoe {
namespace {

using collective::where;

void check_nccl(ncclResult_t r, ncclComm_t comm, const std::string& where_text, const char* call) {
  if (r == ncclSuccess || r == ncclInProgress) return;
  const char* detail = comm ? ncclGetLastError(comm) : "";
  fail(where_text, call, " failed: ", ncclGetErrorString(r), detail && *detail ? std::string(": ") + detail : "");
}

ncclRedOp_t nccl_op(ReduceOp op) { return op == ReduceOp::Sum ? ncclSum : ncclMax; }

// The NCCL type of a reduction's input.
ncclDataType_t reduce_type(const Communicator& c, const char* op, const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float16: return ncclFloat16;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Bool: break;
  }
  fail(where(c, op), "reductions take floating-point or integer tensors, got ", dtype_name(t.dtype()));
}

size_t bytes_of(const Tensor& t) { return size_t(t.numel()) * t.itemsize(); }

// A CUDA event queried without blocking, destroyed with the object.
class QueryEvent {
 public:
  QueryEvent() { UOE_CUDA_CHECK("all_reduce", cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~QueryEvent() { (void)cudaEventDestroy(event_); }
  QueryEvent(const QueryEvent&) = delete;
  QueryEvent& operator=(const QueryEvent&) = delete;
  cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

// An all-reduce running on the communicator's stream; done_ is recorded after it.
class NcclWork final : public Work {
 public:
  NcclWork(Tensor buffer, int device) : buffer_(std::move(buffer)), device_(device) {}
  cudaEvent_t done() const { return done_.get(); }
  void wait() override {
    UOE_CUDA_CHECK("all_reduce", cudaStreamWaitEvent(cuda::current_stream(device_), done_.get(), 0));
    buffer_.bump_version();
  }
  bool test() override {
    const cudaError_t e = cudaEventQuery(done_.get());
    if (e == cudaErrorNotReady) return false;
    UOE_CUDA_CHECK("all_reduce", e);
    return true;
  }

 private:
  Tensor buffer_;  // kept alive while the collective may use it
  int device_;
  QueryEvent done_;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(Communicator& bootstrap, int device)
      : bootstrap_(bootstrap), rank_(bootstrap.rank()), size_(bootstrap.size()), device_(device) {
    static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0, "the NCCL id travels as int64 words");
    const Tensor id_words = zeros({int64_t(sizeof(ncclUniqueId) / sizeof(int64_t))},
                                  TensorOptions{}.with_dtype(DType::Int64));
    ncclUniqueId id{};
    if (rank_ == 0) {
      check_nccl(ncclGetUniqueId(&id), nullptr, where(*this, "world"), "ncclGetUniqueId");
      std::memcpy(id_words.raw_data(), &id, sizeof id);
    }
    bootstrap_.broadcast(id_words, 0);
    std::memcpy(&id, id_words.raw_data(), sizeof id);
    cuda::DeviceGuard guard(device_);
    check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), nullptr, where(*this, "world"), "ncclCommInitRank");
    UOE_CUDA_CHECK("world", cudaStreamCreateWithFlags(&async_stream_, cudaStreamNonBlocking));
  }
  ~NcclCommunicator() override {  // at exit the CUDA runtime may be gone already: errors are ignored
    (void)ncclCommDestroy(comm_);
    (void)cudaStreamDestroy(async_stream_);
  }
  // A communicator that owns its bootstrap (a group split from another): NCCL over the group's ranks.
  NcclCommunicator(std::unique_ptr<Communicator> bootstrap, int device) : NcclCommunicator(*bootstrap, device) {
    owned_bootstrap_ = std::move(bootstrap);
  }
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return bootstrap_.local_rank(); }

  void all_reduce(const Tensor& t, ReduceOp op) override {
    const char* name = "all_reduce";
    const ncclDataType_t type = reduction_input(name, t);
    cuda::DeviceGuard guard(device_);
    check_nccl(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), type, nccl_op(op), comm_, stream()),
               comm_, where(*this, name), "ncclAllReduce");
    t.bump_version();
  }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    const char* name = "all_reduce";
    const ncclDataType_t type = reduction_input(name, t);
    cuda::DeviceGuard guard(device_);
    // The all-reduce waits for the work already queued on the current stream (that produced t), then runs on
    // async_stream_, beside whatever the current stream does next.
    QueryEvent ready;
    UOE_CUDA_CHECK(name, cudaEventRecord(ready.get(), stream()));
    UOE_CUDA_CHECK(name, cudaStreamWaitEvent(async_stream_, ready.get(), 0));
    auto work = std::make_unique<NcclWork>(t, device_);
    check_nccl(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), type, nccl_op(op), comm_, async_stream_),
               comm_, where(*this, name), "ncclAllReduce");
    UOE_CUDA_CHECK(name, cudaEventRecord(work->done(), async_stream_));
    return work;
  }

  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    const char* name = "reduce_scatter";
    collective::check_reduce_scatter(*this, input, output);
    const ncclDataType_t type = reduction_input(name, input);
    cuda::DeviceGuard guard(device_);
    check_nccl(ncclReduceScatter(input.raw_data(), output.raw_data(), size_t(output.numel()), type, nccl_op(op), comm_,
                                 stream()),
               comm_, where(*this, name), "ncclReduceScatter");
    output.bump_version();
  }

  // Uneven blocks: one broadcast per rank, grouped (in place when the input is this rank's block of the output).
  void all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows) override {
    const char* name = "all_gather";
    const std::vector<int64_t> r = collective::gather_rows(*this, input, output, rows);
    check_gpu(name, input);
    const size_t row_bytes = size_t(collective::row_numel(*this, name, output)) * output.itemsize();
    const std::vector<int64_t> offsets = collective::row_offsets(r);
    char* out = static_cast<char*>(output.raw_data());
    cuda::DeviceGuard guard(device_);
    check_nccl(ncclGroupStart(), comm_, where(*this, name), "ncclGroupStart");
    for (int j = 0; j < size_; ++j) {
      char* block = out + size_t(offsets[size_t(j)]) * row_bytes;
      const void* send = j == rank_ ? input.raw_data() : block;
      check_nccl(ncclBroadcast(send, block, size_t(r[size_t(j)]) * row_bytes, ncclUint8, j, comm_, stream()), comm_,
                 where(*this, name), "ncclBroadcast");
    }
    check_nccl(ncclGroupEnd(), comm_, where(*this, name), "ncclGroupEnd");
    output.bump_version();
  }

  void all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                  const std::vector<int64_t>& recv_rows) override {
    const char* name = "all_to_all";
    collective::check_all_to_all(*this, input, send_rows, output, recv_rows);
    check_gpu(name, input);
    const size_t row_bytes = size_t(collective::row_numel(*this, name, input)) * input.itemsize();
    const std::vector<int64_t> send_at = collective::row_offsets(send_rows), recv_at = collective::row_offsets(recv_rows);
    const char* in = static_cast<const char*>(input.raw_data());
    char* out = static_cast<char*>(output.raw_data());
    cuda::DeviceGuard guard(device_);
    check_nccl(ncclGroupStart(), comm_, where(*this, name), "ncclGroupStart");
    for (int j = 0; j < size_; ++j) {
      const size_t s = size_t(j);
      check_nccl(ncclSend(in + size_t(send_at[s]) * row_bytes, size_t(send_rows[s]) * row_bytes, ncclUint8, j, comm_,
                          stream()),
                 comm_, where(*this, name), "ncclSend");
      check_nccl(ncclRecv(out + size_t(recv_at[s]) * row_bytes, size_t(recv_rows[s]) * row_bytes, ncclUint8, j, comm_,
                          stream()),
                 comm_, where(*this, name), "ncclRecv");
    }
    check_nccl(ncclGroupEnd(), comm_, where(*this, name), "ncclGroupEnd");
    output.bump_version();
  }

  void broadcast(const Tensor& t, int root) override {
    const char* name = "broadcast";
    collective::check_tensor(*this, name, t);
    collective::check_root(*this, name, root);
    check_gpu(name, t);
    cuda::DeviceGuard guard(device_);
    check_nccl(ncclBroadcast(t.raw_data(), t.raw_data(), bytes_of(t), ncclUint8, root, comm_, stream()), comm_,
               where(*this, name), "ncclBroadcast");
    t.bump_version();
  }

  // Every rank's queued GPU work finishes, then the ranks meet on the bootstrap communicator.
  void barrier() override {
    cuda::synchronize(device_, "barrier");
    bootstrap_.barrier();
  }

  std::unique_ptr<Communicator> split(int color, int key) override {
    return std::make_unique<NcclCommunicator>(bootstrap_.split(color, key), device_);
  }


 protected:
  void abort_all(int exit_code) override {
    (void)ncclCommAbort(comm_);
    bootstrap_.abort(exit_code);
  }

 private:
  cudaStream_t stream() const { return cuda::current_stream(device_); }

  void check_gpu(const char* name, const Tensor& t) const {
    UOE_CHECK(t.is_cuda() && t.device().index == device_, where(*this, name), "the tensor is on ", t.device().str(),
              " but this rank's NCCL communicator is on cuda:", device_);
  }

  ncclDataType_t reduction_input(const char* name, const Tensor& t) const {
    collective::check_tensor(*this, name, t);
    check_gpu(name, t);
    return reduce_type(*this, name, t);
  }

  Communicator& bootstrap_;
  std::unique_ptr<Communicator> owned_bootstrap_;  // set when this communicator was split from another
  int rank_, size_, device_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t async_stream_ = nullptr;
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace uoe
