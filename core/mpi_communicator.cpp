// MPI backend: collectives on CPU tensors over a duplicate of MPI_COMM_WORLD; all_reduce_async is MPI_Iallreduce.
#include <mpi.h>

#include <climits>

#include "core/collective_checks.h"
#include "core/collective_watchdog.h"
#include "core/communicator.h"
#include "core/error.h"

namespace uoe {
namespace {

using collective::where;

// Raises "[op] rank r of N: <call> failed: <MPI's message>" unless `code` is MPI_SUCCESS.
void check_mpi(int code, const std::string& where_text, const char* call) {
  if (code == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  fail(where_text, call, " failed: ", std::string(text, size_t(length)));
}

// A blocking MPI call, under the collective watchdog while it waits for the other ranks; then its result checked.
template <typename Call>
void blocking(const std::string& where_text, const char* call, const Call& mpi_call) {
  int code = MPI_SUCCESS;
  {
    const watchdog::Blocking watch(where_text + call);
    code = mpi_call();
  }
  check_mpi(code, where_text, call);
}

MPI_Op mpi_op(ReduceOp op) { return op == ReduceOp::Sum ? MPI_SUM : MPI_MAX; }

// A count or displacement as MPI's int.
int mpi_int(const Communicator& c, const char* op, int64_t n, const char* unit) {
  UOE_CHECK(n <= INT_MAX, where(c, op), n, " ", unit, " exceed MPI's int count limit ", INT_MAX,
            "; split the tensor");
  return int(n);
}

// The input of a reduction: a CPU tensor of a dtype MPI can add; returns its MPI type.
MPI_Datatype reduce_type(const Communicator& c, const char* op, const Tensor& t) {
  switch (t.dtype()) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    default:
      fail(where(c, op), "reductions take float32, float64, int32 or int64 tensors, got ", dtype_name(t.dtype()),
           " (convert to float32 first)");
  }
}

void check_cpu(const Communicator& c, const char* op, const Tensor& t) {
  UOE_CHECK(t.is_cpu(), where(c, op), "the tensor is on ", t.device().str(), "; the MPI backend takes CPU tensors");
}

// Byte counts and displacements of blocks of rows (Allgatherv, Alltoallv).
struct ByteBlocks {
  std::vector<int> counts, displs;
};

ByteBlocks byte_blocks(const Communicator& c, const char* op, const std::vector<int64_t>& rows, int64_t row_bytes) {
  ByteBlocks b;
  const std::vector<int64_t> offsets = collective::row_offsets(rows);
  for (size_t j = 0; j < rows.size(); ++j) {
    b.counts.push_back(mpi_int(c, op, rows[j] * row_bytes, "bytes"));
    b.displs.push_back(mpi_int(c, op, offsets[j] * row_bytes, "bytes"));
  }
  return b;
}

class MpiWork final : public Work {
 public:
  MpiWork(MPI_Request request, Tensor buffer, std::string where_text)
      : request_(request), buffer_(std::move(buffer)), where_(std::move(where_text)) {}
  ~MpiWork() override {
    // MPI can neither cancel nor free a running collective. One still running here is being abandoned while an
    // error unwinds the stack (run_or_abort then ends the run), so its buffer is leaked rather than freed while
    // MPI may still write into it.
    if (request_ != MPI_REQUEST_NULL) new Tensor(std::move(buffer_));
  }
  void wait() override {
    if (request_ == MPI_REQUEST_NULL) return;  // seen finished already (MPI resets a completed request)
    blocking(where_, "MPI_Wait", [&] { return MPI_Wait(&request_, MPI_STATUS_IGNORE); });
    buffer_.bump_version();  // the collective wrote the buffer
  }
  bool test() override {
    if (request_ == MPI_REQUEST_NULL) return true;
    int done = 0;
    check_mpi(MPI_Test(&request_, &done, MPI_STATUS_IGNORE), where_, "MPI_Test");
    if (done) buffer_.bump_version();  // the collective wrote the buffer: once, when it is seen to finish
    return done != 0;
  }

 private:
  MPI_Request request_;
  Tensor buffer_;
  std::string where_;
};

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator() {
    int initialised = 0;
    MPI_Initialized(&initialised);
    if (!initialised) {
      int provided = 0;
      // Only the main thread calls MPI (OpenMP workers never do): FUNNELED.
      MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
      owns_mpi_ = true;
      UOE_CHECK(provided >= MPI_THREAD_FUNNELED, "[world] MPI provides thread level ", provided,
                " but uoe needs MPI_THREAD_FUNNELED (its OpenMP threads never call MPI)");
    }
    MPI_Comm_dup(MPI_COMM_WORLD, &comm_);
    join();
  }
  // The ranks of `parent` that passed the same color (MPI_Comm_split). MPI must outlive it.
  MpiCommunicator(MPI_Comm parent, int color, int key, const std::string& what) {
    blocking(what, "MPI_Comm_split", [&] { return MPI_Comm_split(parent, color, key, &comm_); });
    join();
  }
  ~MpiCommunicator() override {
    MPI_Comm_free(&comm_);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owns_mpi_ && !finalized) MPI_Finalize();
  }
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  std::unique_ptr<Communicator> split(int color, int key) override {
    const std::string what = where(*this, "split");
    UOE_CHECK(color >= 0, what, "the color must be >= 0, got ", color);
    return std::make_unique<MpiCommunicator>(comm_, color, key, what);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  int local_rank() const override { return local_rank_; }

  void all_reduce(const Tensor& t, ReduceOp op) override {
    const char* name = "all_reduce";
    const MPI_Datatype type = reduction_input(name, t);
    const int count = mpi_int(*this, name, t.numel(), "elements");
    blocking(where(*this, name), "MPI_Allreduce",
             [&] { return MPI_Allreduce(MPI_IN_PLACE, t.raw_data(), count, type, mpi_op(op), comm_); });
    t.bump_version();
  }

  std::unique_ptr<Work> all_reduce_async(const Tensor& t, ReduceOp op) override {
    const char* name = "all_reduce";
    const MPI_Datatype type = reduction_input(name, t);
    MPI_Request request = MPI_REQUEST_NULL;
    check_mpi(MPI_Iallreduce(MPI_IN_PLACE, t.raw_data(), mpi_int(*this, name, t.numel(), "elements"), type,
                             mpi_op(op), comm_, &request),
              where(*this, name), "MPI_Iallreduce");
    return std::make_unique<MpiWork>(request, t, where(*this, name));
  }

  void reduce_scatter(const Tensor& input, const Tensor& output, ReduceOp op) override {
    const char* name = "reduce_scatter";
    collective::check_reduce_scatter(*this, input, output);
    const MPI_Datatype type = reduction_input(name, input);
    check_cpu(*this, name, output);
    const int count = mpi_int(*this, name, output.numel(), "elements");
    blocking(where(*this, name), "MPI_Reduce_scatter_block", [&] {
      return MPI_Reduce_scatter_block(input.raw_data(), output.raw_data(), count, type, mpi_op(op), comm_);
    });
    output.bump_version();
  }

  void all_gather(const Tensor& input, const Tensor& output, const std::vector<int64_t>& rows) override {
    const char* name = "all_gather";
    const std::vector<int64_t> r = collective::gather_rows(*this, input, output, rows);
    check_cpu(*this, name, input);
    const int64_t row_bytes = collective::row_numel(*this, name, output) * int64_t(output.itemsize());
    const ByteBlocks b = byte_blocks(*this, name, r, row_bytes);
    char* out = static_cast<char*>(output.raw_data());
    const bool in_place = input.raw_data() == out + b.displs[size_t(rank_)];
    blocking(where(*this, name), "MPI_Allgatherv", [&] {
      return MPI_Allgatherv(in_place ? MPI_IN_PLACE : input.raw_data(), b.counts[size_t(rank_)], MPI_BYTE, out,
                            b.counts.data(), b.displs.data(), MPI_BYTE, comm_);
    });
    output.bump_version();
  }

  void all_to_all(const Tensor& input, const std::vector<int64_t>& send_rows, const Tensor& output,
                  const std::vector<int64_t>& recv_rows) override {
    const char* name = "all_to_all";
    collective::check_all_to_all(*this, input, send_rows, output, recv_rows);
    check_cpu(*this, name, input);
    const int64_t row_bytes = collective::row_numel(*this, name, input) * int64_t(input.itemsize());
    const ByteBlocks send = byte_blocks(*this, name, send_rows, row_bytes);
    const ByteBlocks recv = byte_blocks(*this, name, recv_rows, row_bytes);
    blocking(where(*this, name), "MPI_Alltoallv", [&] {
      return MPI_Alltoallv(input.raw_data(), send.counts.data(), send.displs.data(), MPI_BYTE, output.raw_data(),
                           recv.counts.data(), recv.displs.data(), MPI_BYTE, comm_);
    });
    output.bump_version();
  }

  void broadcast(const Tensor& t, int root) override {
    const char* name = "broadcast";
    collective::check_tensor(*this, name, t);
    collective::check_root(*this, name, root);
    check_cpu(*this, name, t);
    const int64_t bytes = t.numel() * int64_t(t.itemsize());
    const int count = mpi_int(*this, name, bytes, "bytes");
    blocking(where(*this, name), "MPI_Bcast", [&] { return MPI_Bcast(t.raw_data(), count, MPI_BYTE, root, comm_); });
    t.bump_version();
  }

  void barrier() override { blocking(where(*this, "barrier"), "MPI_Barrier", [&] { return MPI_Barrier(comm_); }); }

 protected:
  void abort_all(int exit_code) override { MPI_Abort(MPI_COMM_WORLD, exit_code); }

 private:
  // Rank, size and node-local rank of comm_; its errors are returned, not fatal.
  void join() {
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);  // errors become uoe::Error naming the op and rank
    MPI_Comm_rank(comm_, &rank_);
    MPI_Comm_size(comm_, &size_);
    MPI_Comm node;
    check_mpi(MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node), where(*this, "world"),
              "MPI_Comm_split_type");
    MPI_Comm_rank(node, &local_rank_);
    MPI_Comm_free(&node);
  }

  MPI_Datatype reduction_input(const char* name, const Tensor& t) {
    collective::check_tensor(*this, name, t);
    check_cpu(*this, name, t);
    return reduce_type(*this, name, t);
  }

  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  bool owns_mpi_ = false;
};

}  // namespace

std::unique_ptr<Communicator> make_mpi_communicator() { return std::make_unique<MpiCommunicator>(); }

}  // namespace uoe
