// A CPU stand-in for cuda/dynamic_smem.cuh (found first on uoe_cuda_emu_tests' include path): the emulated block's
// dynamic shared memory (tests/cuda_emu/include/cuda_runtime.h).
#pragma once
#include <cuda_runtime.h>

namespace uoe::cuda {

inline unsigned char* dynamic_smem() { return cuda_emu::current_block->smem.get(); }

}  // namespace uoe::cuda
