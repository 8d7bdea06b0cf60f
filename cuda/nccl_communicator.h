// The NCCL communicator (built with UOE_WITH_NCCL): collectives on the CUDA tensors of one GPU per rank. world()
// makes it through the maker that the CUDA runtime registers with core (core/communicator.h).
#pragma once
#include <memory>

#include "core/communicator.h"

namespace uoe {

// The communicator of every rank of `bootstrap` for CUDA tensors on `device`; the NCCL id is sent over `bootstrap`.
std::unique_ptr<Communicator> make_nccl_communicator(Communicator& bootstrap, int device);

}  // namespace uoe
