// A CPU stand-in for NCCL (tests/cuda_emu), found before any real one on the include path of the emulated program:
// the part of NCCL's API that cuda/nccl_communicator.cpp calls, with NCCL's types and values. The ranks of a
// communicator are host threads of this process, one emulated GPU each (cuda_emu/host.h has four); a collective is
// work queued on the stream it is issued to, which runs once every rank has issued its part, in stream order.
//
// A rank's part waits, as on a GPU, for the work each rank queued before it, which may itself wait for collectives of
// other communicators (on the same stream); ranks that issue collectives in different orders deadlock, and the host
// thread that waits for them fails the test after 60 s.
//
// Checked as NCCL checks them, failing the call with ncclInvalidArgument or ncclInvalidUsage and a message for
// ncclGetLastError: the arguments (type, operation, root or peer, counts), buffers that are not device memory of the
// communicator's GPU or that end past their allocation, a stream of another GPU, two ranks on one GPU. What NCCL
// leaves undefined (it hangs or corrupts memory) fails the running test: ranks whose k-th operations differ (another
// collective, count, type, root) and sends without the matching receive.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
};
enum ncclRedOp_t { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 };
enum ncclDataType_t {
  ncclInt8 = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclFloat64 = 8,
  ncclBfloat16 = 9,
};

struct ncclUniqueId {
  char internal[128];
};
struct ncclComm;
using ncclComm_t = ncclComm*;

const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
// Blocks until every rank of the id has called it (at most 60 s).
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream);
