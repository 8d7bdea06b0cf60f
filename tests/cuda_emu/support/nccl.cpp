// The NCCL stand-in (tests/cuda_emu/include/nccl.h): communicators whose ranks are host threads of this process, one
// emulated GPU each. A call (or a group's calls) is a communicator's k-th operation; each rank's part is queued on
// its stream as an item that can run once every rank has issued its part (cuda_emu/host.h). The first rank whose
// item runs first runs every other rank's stream up to its part (the work that produces the inputs), checks that
// the parts match, and moves the data of all ranks at once; the other ranks' items then find it done.
#include <nccl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "core/half.h"

namespace uoe::cuda_emu::nccl {
namespace {

enum class Kind { all_reduce, reduce_scatter, broadcast, send, recv };

const char* name(Kind k) {
  switch (k) {
    case Kind::all_reduce: return "ncclAllReduce";
    case Kind::reduce_scatter: return "ncclReduceScatter";
    case Kind::broadcast: return "ncclBroadcast";
    case Kind::send: return "ncclSend";
    case Kind::recv: return "ncclRecv";
  }
  return "?";
}

// One call of one rank. count: elements of the buffer (reduce_scatter: of each rank's output); peer: the root of a
// broadcast, the other rank of a send or receive.
struct Call {
  Kind kind;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  ncclRedOp_t op;
  int peer;
};

size_t type_size(ncclDataType_t t) {
  switch (t) {
    case ncclInt8:
    case ncclUint8: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
  }
  return 0;
}

std::string describe(const Call& c) {
  std::ostringstream s;
  s << name(c.kind) << "(count " << c.count << ", type " << int(c.type);
  if (c.kind == Kind::all_reduce || c.kind == Kind::reduce_scatter) s << ", op " << int(c.op);
  if (c.kind != Kind::all_reduce && c.kind != Kind::reduce_scatter) s << ", peer " << c.peer;
  return s.str() + ")";
}

// A communicator's k-th operation: each rank's calls, and the stream and item its part was queued as.
struct Operation {
  explicit Operation(int nranks) : parts(size_t(nranks)), queued(size_t(nranks)) {}
  std::vector<std::vector<Call>> parts;
  std::vector<std::pair<CUstream_st*, uint64_t>> queued;
  int issued = 0;
  bool done = false;
  uint64_t index = 0;
};

// The ranks of one unique id.
struct Clique {
  explicit Clique(int n) : nranks(n), devices(size_t(n), -1) {}
  int nranks;
  std::vector<int> devices;  // of the ranks that joined, -1 for the others
  int joined = 0;
  std::map<uint64_t, std::shared_ptr<Operation>> issuing;  // operations not every rank has issued yet
};

std::map<std::string, std::shared_ptr<Clique>>& forming() {  // cliques still waiting for ranks, by id
  static auto* m = new std::map<std::string, std::shared_ptr<Clique>>();
  return *m;
}

thread_local std::string t_last_error;
struct Grouped {
  ncclComm* comm;
  Call call;
  cudaStream_t stream;
};
thread_local int t_group_depth = 0;
thread_local std::vector<Grouped> t_grouped;

ncclResult_t error(ncclResult_t r, const std::string& what) {
  t_last_error = what;
  return r;
}

}  // namespace
}  // namespace uoe::cuda_emu::nccl

struct ncclComm {
  std::shared_ptr<uoe::cuda_emu::nccl::Clique> clique;
  int rank, device;
  uint64_t next = 0;  // operations issued
};

namespace uoe::cuda_emu::nccl {
namespace {

// ---- reductions ----

// How the reduction reads, rounds and writes an element of each type: integers and floats in their own type;
// bfloat16 and float16 in float, rounded to their type after each step, as NCCL adds them.
template <class T>
struct Plain {
  static T load(const void* p, size_t i) { return static_cast<const T*>(p)[i]; }
  static void store(void* p, size_t i, T v) { static_cast<T*>(p)[i] = v; }
  static T round(T v) { return v; }
};
template <float (*to_float)(uint16_t), uint16_t (*from_float)(float)>
struct Reduced {
  static float load(const void* p, size_t i) { return to_float(static_cast<const uint16_t*>(p)[i]); }
  static void store(void* p, size_t i, float v) { static_cast<uint16_t*>(p)[i] = from_float(v); }
  static float round(float v) { return to_float(from_float(v)); }
};
float bf16_to_float(uint16_t h) { return bf16_bits_to_float(h); }
uint16_t float_to_bf16(float f) { return float_to_bf16_bits(f); }
float f16_to_float(uint16_t h) { return f16_bits_to_float(h); }
uint16_t float_to_f16(float f) { return float_to_f16_bits(f); }

// out[i] = op over the ranks (in rank order) of in[r][i].
template <class A>
void reduce_with(const std::vector<const void*>& in, void* out, size_t n, ncclRedOp_t op) {
  for (size_t i = 0; i < n; ++i) {
    auto acc = A::load(in[0], i);
    for (size_t r = 1; r < in.size(); ++r) {
      const auto x = A::load(in[r], i);
      switch (op) {
        case ncclSum:
        case ncclAvg: acc = A::round(acc + x); break;
        case ncclProd: acc = A::round(acc * x); break;
        case ncclMax: acc = x > acc ? x : acc; break;
        case ncclMin: acc = x < acc ? x : acc; break;
      }
    }
    if (op == ncclAvg) acc = A::round(acc / decltype(acc)(in.size()));
    A::store(out, i, acc);
  }
}

void reduce(ncclDataType_t t, const std::vector<const void*>& in, void* out, size_t n, ncclRedOp_t op) {
  switch (t) {
    case ncclInt8: return reduce_with<Plain<int8_t>>(in, out, n, op);
    case ncclUint8: return reduce_with<Plain<uint8_t>>(in, out, n, op);
    case ncclInt32: return reduce_with<Plain<int32_t>>(in, out, n, op);
    case ncclUint32: return reduce_with<Plain<uint32_t>>(in, out, n, op);
    case ncclInt64: return reduce_with<Plain<int64_t>>(in, out, n, op);
    case ncclUint64: return reduce_with<Plain<uint64_t>>(in, out, n, op);
    case ncclFloat16: return reduce_with<Reduced<f16_to_float, float_to_f16>>(in, out, n, op);
    case ncclBfloat16: return reduce_with<Reduced<bf16_to_float, float_to_bf16>>(in, out, n, op);
    case ncclFloat32: return reduce_with<Plain<float>>(in, out, n, op);
    case ncclFloat64: return reduce_with<Plain<double>>(in, out, n, op);
  }
}

// ---- running an operation ----

// What an operation writes: computed from every rank's inputs first, then written (in-place calls read what
// another call of the same group writes).
struct Write {
  void* to;
  std::vector<unsigned char> bytes;
};

std::vector<unsigned char> bytes_at(const void* p, size_t n) {
  const auto* b = static_cast<const unsigned char*>(p);
  return {b, b + n};
}

// The collectives of every rank's part (its sends and receives aside) must be the same calls in the same order.
bool collectives_match(const Operation& op, std::vector<std::vector<Call>>& collectives) {
  for (size_t r = 0; r < op.parts.size(); ++r)
    for (const Call& c : op.parts[r])
      if (c.kind != Kind::send && c.kind != Kind::recv) collectives[r].push_back(c);
  for (size_t r = 1; r < collectives.size(); ++r) {
    const auto& a = collectives[0], &b = collectives[r];
    for (size_t i = 0; i < std::max(a.size(), b.size()); ++i) {
      const std::string da = i < a.size() ? describe(a[i]) : "nothing", db = i < b.size() ? describe(b[i]) : "nothing";
      if (da != db) {
        fault("NCCL operation " + std::to_string(op.index) + ": rank 0 calls " + da + " where rank " +
              std::to_string(r) + " calls " + db + " (NCCL would hang or corrupt memory)");
        return false;
      }
    }
  }
  return true;
}

void run_collective(const std::vector<Call>& calls, std::vector<Write>& writes) {
  const Call& c = calls[0];
  const size_t n = calls.size(), size = type_size(c.type), bytes = c.count * size;
  std::vector<const void*> in(n);
  switch (c.kind) {
    case Kind::all_reduce: {
      for (size_t r = 0; r < n; ++r) in[r] = calls[r].send;
      std::vector<unsigned char> result(bytes);
      reduce(c.type, in, result.data(), c.count, c.op);
      for (size_t r = 0; r < n; ++r) writes.push_back({calls[r].recv, result});
      break;
    }
    case Kind::reduce_scatter:
      for (size_t to = 0; to < n; ++to) {
        for (size_t r = 0; r < n; ++r) in[r] = static_cast<const unsigned char*>(calls[r].send) + to * bytes;
        std::vector<unsigned char> result(bytes);
        reduce(c.type, in, result.data(), c.count, c.op);
        writes.push_back({calls[to].recv, std::move(result)});
      }
      break;
    case Kind::broadcast: {
      const std::vector<unsigned char> root = bytes_at(calls[size_t(c.peer)].send, bytes);
      for (size_t r = 0; r < n; ++r) writes.push_back({calls[r].recv, root});
      break;
    }
    case Kind::send:
    case Kind::recv: break;
  }
}

// Each rank's sends to a peer, in order, go to that peer's receives from it, in order: same count, same type.
bool run_point_to_point(const Operation& op, std::vector<Write>& writes) {
  const size_t n = op.parts.size();
  for (size_t from = 0; from < n; ++from)
    for (size_t to = 0; to < n; ++to) {
      std::vector<const Call*> sends, recvs;
      for (const Call& c : op.parts[from])
        if (c.kind == Kind::send && size_t(c.peer) == to) sends.push_back(&c);
      for (const Call& c : op.parts[to])
        if (c.kind == Kind::recv && size_t(c.peer) == from) recvs.push_back(&c);
      for (size_t i = 0; i < std::max(sends.size(), recvs.size()); ++i) {
        const Call *s = i < sends.size() ? sends[i] : nullptr, *r = i < recvs.size() ? recvs[i] : nullptr;
        if (!s || !r || s->count != r->count || s->type != r->type) {
          fault("NCCL operation " + std::to_string(op.index) + ": rank " + std::to_string(from) + " sends " +
                (s ? describe(*s) : "nothing") + " to rank " + std::to_string(to) + ", which receives " +
                (r ? describe(*r) : "nothing") + " (NCCL would hang or corrupt memory)");
          return false;
        }
        writes.push_back({r->recv, bytes_at(s->send, s->count * type_size(s->type))});
      }
    }
  return true;
}

// The work queued on `stream` before its `item` (the item's own waits included): run, or whether it could run. False
// too when the item was taken to run already (only ranks that issued their operations in different orders get there).
bool run_before(CUstream_st* stream, uint64_t item) {
  if (!run_until(stream, item - 1) || !queued_item(stream, item)) return false;
  for (auto [other, n] : queued_item(stream, item)->waits)
    if (!run_until(other, n)) return false;
  return true;
}
bool can_run_before(const CUstream_st* stream, uint64_t item) {
  if (!can_run(stream, item - 1) || !queued_item(stream, item)) return false;
  for (auto [other, n] : queued_item(stream, item)->waits)
    if (!can_run(other, n)) return false;
  return true;
}

// Whether `rank`'s part can run: every rank has issued its part, and what each other rank queued before its part can
// run (it may wait for other collectives: of another communicator on the same stream, as on a GPU). Ranks that issue
// collectives in different orders wait for each other in a cycle, a deadlock: never ready.
bool ready(const Operation& op, int rank) {
  if (op.done) return true;
  if (op.issued < int(op.parts.size())) return false;
  thread_local std::vector<const Operation*> checking;  // whose readiness is being asked, outermost first
  if (std::find(checking.begin(), checking.end(), &op) != checking.end()) return false;
  checking.push_back(&op);
  bool ok = true;
  for (size_t r = 0; ok && r < op.queued.size(); ++r)
    if (int(r) != rank) ok = can_run_before(op.queued[r].first, op.queued[r].second);
  checking.pop_back();
  return ok;
}

// Runs the work each other rank queued before its part, so that every input is there (ready() said it can run).
void run_inputs(const Operation& op, int rank) {
  for (size_t r = 0; r < op.queued.size(); ++r)
    if (int(r) != rank && !run_before(op.queued[r].first, op.queued[r].second))
      fault("NCCL operation " + std::to_string(op.index) + ": rank " + std::to_string(r) +
            "'s work before its part stopped at a collective, although it could run");
}

// The item of `rank`'s part: runs the whole operation, unless another rank's item did.
void perform(Operation& op, int rank) {
  if (op.done) return;
  op.done = true;
  run_inputs(op, rank);
  std::vector<std::vector<Call>> collectives(op.parts.size());
  if (!collectives_match(op, collectives)) return;
  std::vector<Write> writes;
  for (size_t i = 0; i < collectives[0].size(); ++i) {
    std::vector<Call> calls;
    for (const auto& part : collectives) calls.push_back(part[i]);
    run_collective(calls, writes);
  }
  if (!run_point_to_point(op, writes)) return;
  for (const Write& w : writes)
    if (!w.bytes.empty()) std::memcpy(w.to, w.bytes.data(), w.bytes.size());
}

// Queues `rank`'s part of its communicator's next operation on `stream`.
void issue(ncclComm* comm, std::vector<Call> calls, cudaStream_t stream) {
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  Clique& clique = *comm->clique;
  const uint64_t index = comm->next++;
  std::shared_ptr<Operation>& slot = clique.issuing[index];
  if (!slot) slot = std::make_shared<Operation>(clique.nranks), slot->index = index;
  const std::shared_ptr<Operation> op = slot;
  op->parts[size_t(comm->rank)] = std::move(calls);
  if (++op->issued == clique.nranks) clique.issuing.erase(index);
  const int rank = comm->rank;
  const uint64_t item = enqueue(
      stream, [op, rank] { perform(*op, rank); }, [op, rank] { return ready(*op, rank); });
  op->queued[size_t(rank)] = {resolve(stream), item};
}

// ---- checking a call ----

std::string where(const char* call, const ncclComm* comm) {
  return std::string(call) + " (rank " + std::to_string(comm->rank) + " of " + std::to_string(comm->clique->nranks) +
         ", cuda:" + std::to_string(comm->device) + "): ";
}

// A buffer of `bytes` at p must lie in one device allocation of the communicator's GPU.
ncclResult_t check_buffer(const char* call, const ncclComm* comm, const char* what, const void* p, size_t bytes) {
  if (bytes == 0) return ncclSuccess;
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  const Allocation* a = find_allocation(p);
  if (!a || a->kind != Memory::device || a->device != comm->device)
    return error(ncclInvalidArgument, where(call, comm) + what + " is not device memory of cuda:" +
                                          std::to_string(comm->device));
  const auto base = state().allocations.upper_bound(reinterpret_cast<uintptr_t>(p));
  const uintptr_t end = std::prev(base)->first + a->bytes;
  if (reinterpret_cast<uintptr_t>(p) + bytes > end)
    return error(ncclInvalidArgument, where(call, comm) + what + " of " + std::to_string(bytes) +
                                          " bytes ends past its allocation");
  return ncclSuccess;
}

ncclResult_t check(const Call& c, const ncclComm* comm, cudaStream_t stream) {
  const char* call = name(c.kind);
  if (!comm) return error(ncclInvalidArgument, std::string(call) + ": comm is null");
  if (type_size(c.type) == 0) return error(ncclInvalidArgument, where(call, comm) + "unknown datatype");
  if (c.op < ncclSum || c.op > ncclAvg) return error(ncclInvalidArgument, where(call, comm) + "unknown reduction");
  if (c.peer < 0 || c.peer >= comm->clique->nranks)
    return error(ncclInvalidArgument, where(call, comm) + (c.kind == Kind::broadcast ? "root " : "peer ") +
                                          std::to_string(c.peer) + " is not a rank");
  {
    std::lock_guard<std::recursive_mutex> lock(state().mu);
    if (resolve(stream)->device != comm->device)
      return error(ncclInvalidArgument, where(call, comm) + "the stream belongs to cuda:" +
                                            std::to_string(resolve(stream)->device));
  }
  const size_t bytes = c.count * type_size(c.type);
  const size_t send_bytes = c.kind == Kind::reduce_scatter ? bytes * size_t(comm->clique->nranks) : bytes;
  const bool reads = c.kind != Kind::recv && (c.kind != Kind::broadcast || c.peer == comm->rank);
  if (reads)
    if (ncclResult_t r = check_buffer(call, comm, "sendbuff", c.send, send_bytes); r != ncclSuccess) return r;
  if (c.kind != Kind::send) return check_buffer(call, comm, "recvbuff", c.recv, bytes);
  return ncclSuccess;
}

ncclResult_t call(const Call& c, ncclComm* comm, cudaStream_t stream) {
  if (ncclResult_t r = check(c, comm, stream); r != ncclSuccess) return r;
  if (t_group_depth > 0) {
    t_grouped.push_back({comm, c, stream});
    return ncclSuccess;
  }
  issue(comm, {c}, stream);
  return ncclSuccess;
}

}  // namespace
}  // namespace uoe::cuda_emu::nccl

using namespace uoe::cuda_emu::nccl;
using uoe::cuda_emu::state;

const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error";
    case ncclSystemError: return "unhandled system error";
    case ncclInternalError: return "internal error";
    case ncclInvalidArgument: return "invalid argument";
    case ncclInvalidUsage: return "invalid usage";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
  }
  return "unknown result code";
}
const char* ncclGetLastError(ncclComm_t) { return t_last_error.c_str(); }

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  static std::mt19937_64 random{std::random_device{}()};
  std::lock_guard<std::recursive_mutex> lock(state().mu);
  std::memset(id->internal, 0, sizeof id->internal);
  for (size_t i = 0; i < 4; ++i) {
    const uint64_t word = random();
    std::memcpy(id->internal + 8 * i, &word, sizeof word);
  }
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return error(ncclInvalidArgument, "ncclCommInitRank: rank " + std::to_string(rank) + " of " +
                                          std::to_string(nranks));
  const std::string key(id.internal, sizeof id.internal);
  std::unique_lock<std::recursive_mutex> lock(state().mu);
  std::shared_ptr<Clique>& slot = forming()[key];
  if (!slot) slot = std::make_shared<Clique>(nranks);
  const std::shared_ptr<Clique> clique = slot;
  const int device = uoe::cuda_emu::t_device;
  if (clique->nranks != nranks || clique->devices[size_t(rank)] != -1)
    return error(ncclInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks) +
                                       " joins a unique id of " + std::to_string(clique->nranks) +
                                       " ranks twice or with another size");
  for (int r = 0; r < nranks; ++r)
    if (clique->devices[size_t(r)] == device)
      return error(ncclInvalidUsage, "ncclCommInitRank: Duplicate GPU detected: rank " + std::to_string(rank) +
                                         " and rank " + std::to_string(r) + " both on cuda:" + std::to_string(device));
  clique->devices[size_t(rank)] = device;
  if (++clique->joined == nranks) forming().erase(key);
  state().issued.notify_all();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (clique->joined < nranks)
    if (state().issued.wait_until(lock, deadline) == std::cv_status::timeout && clique->joined < nranks) {
      clique->devices[size_t(rank)] = -1, --clique->joined;
      return error(ncclSystemError, "ncclCommInitRank: rank " + std::to_string(rank) + " waited 60 s for the other " +
                                        std::to_string(nranks - clique->joined - 1) + " of " + std::to_string(nranks));
    }
  *comm = new ncclComm{clique, rank, device};
  return ncclSuccess;
}

// The queued parts of its operations still run (they hold what they need).
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  delete comm;
  return ncclSuccess;
}
ncclResult_t ncclCommAbort(ncclComm_t comm) { return ncclCommDestroy(comm); }

ncclResult_t ncclGroupStart() {
  ++t_group_depth;
  return ncclSuccess;
}

// Issues the group's calls: one operation per communicator, on the one stream its calls name.
ncclResult_t ncclGroupEnd() {
  if (t_group_depth == 0) return error(ncclInvalidUsage, "ncclGroupEnd: no ncclGroupStart before it");
  if (--t_group_depth > 0) return ncclSuccess;
  const std::vector<Grouped> grouped = std::exchange(t_grouped, {});
  std::vector<std::pair<ncclComm*, cudaStream_t>> order;
  std::map<ncclComm*, std::vector<Call>> calls;
  for (const Grouped& g : grouped) {
    if (!calls.count(g.comm)) order.emplace_back(g.comm, g.stream);
    calls[g.comm].push_back(g.call);
    const auto first = std::find_if(order.begin(), order.end(), [&](const auto& o) { return o.first == g.comm; });
    if (first->second != g.stream)
      return error(ncclInvalidUsage, "ncclGroupEnd: the stand-in takes one stream per communicator in a group");
  }
  for (const auto& [comm, stream] : order) issue(comm, std::move(calls[comm]), stream);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return call({Kind::all_reduce, sendbuff, recvbuff, count, datatype, op, 0}, comm, stream);
}
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return call({Kind::reduce_scatter, sendbuff, recvbuff, recvcount, datatype, op, 0}, comm, stream);
}
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return call({Kind::broadcast, sendbuff, recvbuff, count, datatype, ncclSum, root}, comm, stream);
}
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return call({Kind::send, sendbuff, nullptr, count, datatype, ncclSum, peer}, comm, stream);
}
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return call({Kind::recv, nullptr, recvbuff, count, datatype, ncclSum, peer}, comm, stream);
}
