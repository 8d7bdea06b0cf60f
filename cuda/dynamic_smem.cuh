// The block's dynamic shared memory, for the kernels that size it at launch. tests/cuda_emu/include/cuda/
// dynamic_smem.cuh gives the emulated block's instead (uoe_cuda_emu_tests): change the two together.
#pragma once
#include <cuda_runtime.h>

namespace uoe::cuda {

// The launch's dynamic shared memory, 128-byte aligned.
__device__ __forceinline__ unsigned char* dynamic_smem() {
  extern __shared__ __align__(128) unsigned char dynamic_smem_bytes[];
  return dynamic_smem_bytes;
}

}  // namespace uoe::cuda
