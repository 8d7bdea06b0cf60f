// The ranks of a run as threads of this process, for the NCCL stand-in (tests/cuda_emu/include/nccl.h), whose ranks
// are threads: run_ranks(n, body) runs body on n threads, rank r's thread with cuda:r current and one OpenMP thread,
// each with its communicator: CPU tensors exchanged in memory, CUDA tensors through NCCL, routed by device as
// world() routes them under a launcher (route_by_device).
#pragma once
#include <functional>

#include "core/communicator.h"

namespace uoe::test {

// Returns once every rank's body has; an exception of a body (after which the other ranks' collectives raise
// instead of waiting for it) is rethrown here.
void run_ranks(int n, const std::function<void(Communicator& comm)>& body);

}  // namespace uoe::test
