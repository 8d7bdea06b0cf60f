// NCCL backend: collectives on CUDA tensors of one GPU per rank; the NCCL unique id travels over the bootstrap
// (MPI) communicator. Every collective runs on the device's communication stream, after the work queued so far on
// the current stream; the current stream waits for its result at once, or, for all_reduce_async, at Work::wait().
#include <nccl.h>

#include <cstring>
#include <initializer_list>
#include <map>
#include <mutex>

#include "core/collective_checks.h"
#include "core/collective_watchdog.h"
#include "cuda/nccl_communicator.h"

#include "core/communicator.h"
#include "cuda/caching_allocator.h"
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

// The stream every NCCL operation of a device runs on, whichever communicator issues it. NCCL operations of
// different communicators (data-parallel groups, the expert group) must not run concurrently, or they may
// deadlock; here they run one after another in the order this rank issues them, which is the same on every rank.
cudaStream_t communication_stream(int device) {
  static std::mutex mu;
  // never destroyed: collectives may run during static destruction
  static auto* streams = new std::map<int, cudaStream_t>();
  std::lock_guard<std::mutex> lock(mu);
  cudaStream_t& s = (*streams)[device];
  if (!s) {
    cuda::DeviceGuard guard(device);
    UOE_CUDA_CHECK("world", cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return s;
}

// A collective running on the communication stream; done_ is recorded after it. Until wait() the current stream
// does not see its result; a Work dropped without wait() still orders the current stream after it, as wait()
// would. (Its buffer's memory is safe either way: enqueue marked it with record_stream.)
class NcclWork final : public Work {
 public:
  NcclWork(Tensor buffer, int device, std::shared_ptr<cuda::Event> done)
      : buffer_(std::move(buffer)), device_(device), done_(std::move(done)) {}
  ~NcclWork() override {
    if (waited_) return;
    try {
      order_current_stream();
    } catch (const Error&) {  // no throwing from a destructor: the error surfaces at the next checked call
    }
  }
  void wait() override {
    order_current_stream();
    waited_ = true;
    buffer_.bump_version();
  }
  bool test() override {
    const cudaError_t e = done_->query();
    if (e == cudaErrorNotReady) return false;
    UOE_CUDA_CHECK("all_reduce", e);
    return true;
  }

 private:
  // The current stream of the communicator's GPU waits for the collective (the legacy default stream is the
  // current device's: that GPU must be current).
  void order_current_stream() const {
    cuda::DeviceGuard guard(device_);
    done_->wait(cuda::current_stream(device_));
  }

  Tensor buffer_;  // kept alive while the collective may use it
  int device_;
  std::shared_ptr<cuda::Event> done_;
  bool waited_ = false;
};

// ncclGroupStart() ... end(): the group is closed even when a call inside it throws (an open group would defer
// every later NCCL call of this thread, and the run would hang instead of reporting the error).
class NcclGroup {
 public:
  NcclGroup(ncclComm_t comm, std::string where_text) : comm_(comm), where_(std::move(where_text)) {
    check_nccl(ncclGroupStart(), comm_, where_, "ncclGroupStart");
  }
  ~NcclGroup() {
    if (open_) (void)ncclGroupEnd();
  }
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  void end() {
    open_ = false;
    check_nccl(ncclGroupEnd(), comm_, where_, "ncclGroupEnd");
  }

 private:
  ncclComm_t comm_;
  std::string where_;
  bool open_ = true;
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
    stream_ = communication_stream(device_);
  }
  ~NcclCommunicator() override { (void)ncclCommDestroy(comm_); }  // at exit the runtime may be gone: errors ignored
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
    run(name, {t}, [&] {
      check_nccl(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), type, nccl_op(op), comm_, stream_),
                 comm_, where(*this, name), "ncclAllReduce");
    });
    t.bump_version();
  }

  // The all-reduce starts after the work already queued on the current stream (that produced t); whatever the
  // current stream does next runs beside it until Work::wait().
  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    const char* name = "all_reduce";
    const ncclDataType_t type = reduction_input(name, t);
    cuda::DeviceGuard guard(device_);
    auto done = enqueue(name, {t}, [&] {
      check_nccl(ncclAllReduce(t.raw_data(), t.raw_data(), size_t(t.numel()), type, nccl_op(op), comm_, stream_),
                 comm_, where(*this, name), "ncclAllReduce");
    });
    return std::make_unique<NcclWork>(t, device_, std::move(done));
  }

  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    const char* name = "reduce_scatter";
    collective::check_reduce_scatter(*this, input, output);
    const ncclDataType_t type = reduction_input(name, input);
    run(name, {input, output}, [&] {
      check_nccl(ncclReduceScatter(input.raw_data(), output.raw_data(), size_t(output.numel()), type, nccl_op(op),
                                   comm_, stream_),
                 comm_, where(*this, name), "ncclReduceScatter");
    });
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
    run(name, {input, output}, [&] {
      NcclGroup group(comm_, where(*this, name));
      for (int j = 0; j < size_; ++j) {
        char* block = out + size_t(offsets[size_t(j)]) * row_bytes;
        const void* send = j == rank_ ? input.raw_data() : block;
        check_nccl(ncclBroadcast(send, block, size_t(r[size_t(j)]) * row_bytes, ncclUint8, j, comm_, stream_), comm_,
                   where(*this, name), "ncclBroadcast");
      }
      group.end();
    });
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
    run(name, {input, output}, [&] {
      NcclGroup group(comm_, where(*this, name));
      for (int j = 0; j < size_; ++j) {
        const size_t s = size_t(j);
        check_nccl(ncclSend(in + size_t(send_at[s]) * row_bytes, size_t(send_rows[s]) * row_bytes, ncclUint8, j,
                            comm_, stream_),
                   comm_, where(*this, name), "ncclSend");
        check_nccl(ncclRecv(out + size_t(recv_at[s]) * row_bytes, size_t(recv_rows[s]) * row_bytes, ncclUint8, j,
                            comm_, stream_),
                   comm_, where(*this, name), "ncclRecv");
      }
      group.end();
    });
    output.bump_version();
  }

  void broadcast(const Tensor& t, int root) override {
    const char* name = "broadcast";
    collective::check_tensor(*this, name, t);
    collective::check_root(*this, name, root);
    check_gpu(name, t);
    run(name, {t}, [&] {
      check_nccl(ncclBroadcast(t.raw_data(), t.raw_data(), bytes_of(t), ncclUint8, root, comm_, stream_), comm_,
                 where(*this, name), "ncclBroadcast");
    });
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
  // Issues the NCCL calls of `calls` on the communication stream after the work queued so far on the current
  // stream; returns an event recorded after them, which the collective watchdog polls. The tensors they read or
  // write are marked as used on the communication stream: their memory is not reused before NCCL is done with
  // it, whichever stream frees or allocates it. The caller holds a DeviceGuard on device_.
  template <typename Calls>
  std::shared_ptr<cuda::Event> enqueue(const char* name, std::initializer_list<Tensor> used, const Calls& calls) {
    cuda::Event ready;
    ready.record(cuda::current_stream(device_));
    ready.wait(stream_);
    calls();
    for (const Tensor& t : used) cuda::record_stream(t, stream_);
    auto done = std::make_shared<cuda::Event>();
    done->record(stream_);
    // Polled from the watchdog's thread, which makes this GPU current first (else the CUDA runtime would give it,
    // and so this rank, a context on GPU 0). An error (a failed kernel) is not a hang: the next checked CUDA call
    // reports it.
    watchdog::watch(where(*this, name) + "NCCL on cuda:" + std::to_string(device_), [done, device = device_] {
      (void)cudaSetDevice(device);
      return done->query() != cudaErrorNotReady;
    });
    return done;
  }

  // A blocking collective: enqueued, and the current stream waits for it.
  template <typename Calls>
  void run(const char* name, std::initializer_list<Tensor> used, const Calls& calls) {
    cuda::DeviceGuard guard(device_);
    const auto done = enqueue(name, used, calls);
    done->wait(cuda::current_stream(device_));
  }

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
  cudaStream_t stream_ = nullptr;  // communication_stream(device_)
};

}  // namespace

std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device) {
  return std::make_unique<NcclCommunicator>(bootstrap, device);
}

}  // namespace uoe
